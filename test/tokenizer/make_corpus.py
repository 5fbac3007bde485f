#!/usr/bin/env python3
"""Text for the tokenizer exactness test and benchmark, made from what the machine has.

  make_corpus.py corpus OUT [MB]   about MB (default 20) of varied real text: licenses, man
                                   pages in a dozen languages, package docs, C headers,
                                   Python sources, X11 compose tables (symbols of every script)
  make_corpus.py torture OUT       the hand-made Unicode torture file (see torture())

Files are taken in sorted order, each source up to its share, so two runs on one machine
make the same corpus. Exits 1 when the machine has less text than asked for.
"""
import glob
import gzip
import os
import random
import sys

# (glob, share of the corpus): man pages in many scripts and languages first.
SOURCES = [
    ("/usr/share/common-licenses/*", 0.02),
    ("/usr/share/man/man[1-8]/*.gz", 0.22),
    ("/usr/share/man/ja/man*/*.gz", 0.06),
    ("/usr/share/man/ko/man*/*.gz", 0.03),
    ("/usr/share/man/ru/man*/*.gz", 0.05),
    ("/usr/share/man/zh_CN/man*/*.gz", 0.03),
    ("/usr/share/man/[dfpi]*/man*/*.gz", 0.08),  # de, fi, fr, pl, pt, it, id
    ("/usr/share/man/[c-z]*/man*/*.gz", 0.04),   # every other translation
    ("/usr/share/doc/*/*", 0.15),
    ("/usr/include/**/*.h", 0.14),
    ("/usr/lib/python3*/**/*.py", 0.14),
    ("/usr/share/X11/locale/*/Compose", 0.04),
]


def read(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        return data
    except (OSError, EOFError, gzip.BadGzipFile):
        return b""


def corpus(out, megabytes):
    total = int(megabytes * 1e6)
    parts, size = [], 0
    for pattern, share in SOURCES:
        quota, taken = int(total * share) + 1, 0
        for path in sorted(glob.glob(pattern, recursive=True)):
            if taken >= quota:
                break
            if not os.path.isfile(path) or os.path.islink(path) and not os.path.exists(path):
                continue
            data = read(path)
            if not data or b"\0" in data[:4096]:  # binary files are not text
                continue
            data = data[: quota - taken]
            parts.append(data)
            taken += len(data)
        size += taken
    # Top up from the largest sources when a share was short (a machine with fewer man pages).
    for pattern in ("/usr/include/**/*.h", "/usr/lib/python3*/**/*.py", "/usr/share/doc/*/*"):
        for path in sorted(glob.glob(pattern, recursive=True), reverse=True):
            if size >= total:
                break
            data = read(path) if os.path.isfile(path) else b""
            if data and b"\0" not in data[:4096]:
                parts.append(data)
                size += len(data)
    if size < total:
        sys.exit(f"make_corpus.py: found only {size} bytes of text, {total} asked for")
    with open(out, "wb") as f:
        f.write(b"".join(parts))


def torture():
    """Every case a byte-level tokenizer can get wrong, in a fixed order, then a seeded random mix."""
    s = []
    s.append("English: don't DON'T I'm I'M they'll THEY'LL we've you're he'd it's O'Neil 'quoted' ''\n")
    s.append("CJK: 日本語のテキスト、中文文本。한국어 텍스트입니다. 汉字和かなカナ混じり文。\n")
    s.append("Emoji: 👍 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 1️⃣ #️⃣ ❤️ 🧑🏿‍🚀 😀😃😄\n")
    s.append("Combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353\u0300\u0301\u0302\u0303\u0304 i\u0307\u0301 \u0301start\n")
    s.append("Zalgo: " + "".join(c + "\u0336\u0334\u0335" * 3 for c in "zalgo text") + "\n")
    s.append("RTL: العربية نص \u200fعربي\u200f עברית טקסט \u202eoverride\u202c mixed עב123ית\n")
    s.append("Scripts: Ελληνικά Кириллица हिन्दी ไทย ქართული Հայերեն አማርኛ ᚠᚢᚦ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚 ℌℑ\n")
    s.append("Digits: 0123456789 ١٢٣٤٥ ०१२३ 一二三 ⅠⅡⅢ ½¾ ²³ 1,234,567.89 3.14159e-10 0x1F\n")
    s.append("Spaces: a\u00a0b\u2000c\u2003d\u3000e\u180ef\u200bg\ufeffh\u2028i\u2029j\u0085k\tl\x0bm\x0cn\r\no\n")
    s.append("Controls: " + "".join(chr(c) for c in range(0, 32) if c not in (10, 13)) + "\x7f\n")
    s.append("Specials typed in text: <|endoftext|> <|fim_prefix|> <|begin_of_text|> <s> </s> <|endofprompt|>\n")
    s.append("Punct: ... !!! ??? --- ___ *** /// \\\\ ''' \"\"\" ``` <<<>>> {{}} [[]] ((())) @#$%^&*\n")
    s.append("Runs of spaces:" + " " * 1000 + "x" + " " * 3 + "\n" + " " * 7 + "\n")
    s.append("Runs of digits: " + "1234567890" * 300 + "\n")
    s.append("Runs of newlines:" + "\n" * 500 + "after\r\n\r\n\r\n" + "\r" * 50 + "\n \n \n")
    s.append("Tabs:" + "\t" * 200 + "end\n" + "  \t  \t\n")
    s.append("Trailing whitespace at the very end comes last.\n")
    text = "".join(s).encode("utf-8")
    invalid = (
        b"Invalid UTF-8: lone continuation \x80 \xbf, overlong \xc0\xaf \xe0\x80\xaf, surrogate \xed\xa0\x80, "
        b"too large \xf4\x90\x80\x80 \xf5\xff \xfe\xff, truncated \xe6\x97 \xf0\x9f\x98 end \xc3\n"
    )
    rng = random.Random(20240520)
    pools = [
        [chr(c) for c in range(0x20, 0x7F)],
        [" ", " ", "\n", "\t", "\r\n", "\u00a0", "\u3000"],
        [chr(c) for c in range(0x4E00, 0x4E80)] + [chr(c) for c in range(0xAC00, 0xAC40)],
        [chr(c) for c in range(0x0600, 0x0650)] + [chr(c) for c in range(0x05D0, 0x05EA)],
        [chr(c) for c in range(0x0300, 0x0340)],
        [chr(c) for c in range(0x1F600, 0x1F640)] + ["\u200d", "\ufe0f", "\U0001F3FD"],
        [chr(c) for c in range(0x0400, 0x0450)] + [chr(c) for c in range(0x0900, 0x0950)],
        ["'s", "'T", "'ll", "'RE", "0", "42", "999", "..."],
    ]
    rand = []
    for _ in range(40000):
        pool = pools[rng.randrange(len(pools))]
        rand.append("".join(rng.choice(pool) for _ in range(rng.randrange(1, 12))))
    rand_bytes = "".join(rand).encode("utf-8")
    # Random invalid bytes sprinkled into a copy of the random text.
    noisy = bytearray(rand_bytes[:60000])
    for _ in range(300):
        noisy[rng.randrange(len(noisy))] = rng.randrange(0x80, 0x100)
    return text + invalid + rand_bytes + b"\n" + bytes(noisy) + " ends with spaces   ".encode()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "corpus":
        corpus(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 20.0)
    elif len(sys.argv) == 3 and sys.argv[1] == "torture":
        with open(sys.argv[2], "wb") as f:
            f.write(torture())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
