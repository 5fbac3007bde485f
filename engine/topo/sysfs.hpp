// Small readers for sysfs-style files: one value per file, trailing newline. Internal to
// engine/topo. "Missing or unreadable" and "garbage" are kept apart: the first means the
// kernel does not say (unknown), the second is an error that names the file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace holmes::topo::sysfs {

namespace fs = std::filesystem;

// The file's first line without surrounding white space; nullopt when it cannot be read
// (missing, or a read error such as EINVAL from `speed` of a down interface).
std::optional<std::string> read_line(const fs::path& file);

// As read_line, but a missing file is a UserError naming it and saying what it should hold.
std::string read_required(const fs::path& file, const char* expected);

// Whole decimal integer (optional sign); throws UserError naming `file` otherwise.
long parse_int(const std::string& text, const fs::path& file, const char* expected);

// IB port rate "200 Gb/sec (4X HDR)" or "2.5 Gb/sec (1X SDR)" -> Gb/s.
double parse_ib_rate(const std::string& text, const fs::path& file);

// Entries of a folder sorted naturally ("eth2" before "eth10"); empty when it does not exist.
std::vector<std::string> list_dir(const fs::path& dir);

// Natural order of names: digit runs compare as numbers.
bool natural_less(const std::string& a, const std::string& b);

// The PCI address ("0000:17:00.0") a `device` link leads to, "" when it leads elsewhere.
std::string pci_address_of(const fs::path& device_link);

}  // namespace holmes::topo::sysfs
