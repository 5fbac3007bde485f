#!/usr/bin/env bash
# A pipeline's hop inside an RDMA island takes the island, also when the pipeline crosses
# islands (scripts/lab/scenarios/hop.yaml: two IB nodes and a RoCE node, pp3). holmes's plan
# lists one pp-hop group over IPoIB beside the pipeline group on Ethernet; the bytes its nodes
# sent over Ethernet in a step are what its plan counts there (the crossing hop, the tied
# embedding's sum, the log exchange) to within half the IB hop's bytes, so that hop's
# activations did not take Ethernet, and fewer than megatron's (every hop on Ethernet); both
# train to bit-identical losses. Needs root (network namespaces, tc).
# Usage: lab_hop.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
source "$(dirname "$0")/lab_common.bash"
sc=$src/scripts/lab/scenarios/hop.yaml
for case in holmes megatron; do
  timeout 300 "$src/scripts/lab/run.sh" "$sc" "$case" --out "$tmp/$case" >"$tmp/$case.log" 2>&1 \
    || bad "$case: exit $?" "$tmp/$case.log"
done
grep -Eq "^  pp +1 x 3 +gloo-tcp over ethernet, crosses islands \[eth0\]" "$tmp/holmes.log" \
  && grep -Eq "^  pp-hop +1 x 2 +gloo-tcp over ib \[ib0\]" "$tmp/holmes.log" \
  || bad "holmes: the pipeline on Ethernet with its IB hop on a pp-hop group over ib0" "$tmp/holmes.log"
grep -q "pp-hop" "$tmp/megatron.log" && bad "megatron: every hop on the pipeline group over Ethernet" "$tmp/megatron.log"
# Measured Ethernet bytes per step (every node's Ethernet interface, a window of steps) and the
# plan's prediction of them.
eth_of() { sed -n 's/.* \([0-9.]*\) MB per step sent over Ethernet by all nodes.*/\1/p' "$1" | head -1; }
pred_of() {  # pred_of LOG LINK: the plan's bytes per step over LINK, in MB
  sed -n "s/.*bytes sent per step: .*$2 \([0-9.]*\) \([KMG]*\)B.*/\1 \2/p" "$1" | head -1 |
    awk '{ print $1 * ($2 == "K" ? 1e-3 : $2 == "M" ? 1 : $2 == "G" ? 1e3 : 1e-6) }'
}
h=$(eth_of "$tmp/holmes.log") m=$(eth_of "$tmp/megatron.log")
p=$(pred_of "$tmp/holmes.log" ethernet) ib=$(pred_of "$tmp/holmes.log" ib)
echo "Ethernet MB per step: holmes $h (its plan: $p, and $ib over IB), megatron $m"
awk -v h="$h" -v m="$m" -v p="$p" -v ib="$ib" 'BEGIN {
  exit !(h > 0 && ib > 0 && h < m && h - p < ib / 2 && p - h < ib / 2) }' \
  || bad "Ethernet bytes per step: holmes '$h' MB (plan '$p' MB, '$ib' MB over IB), megatron '$m' MB" "$tmp/holmes.log"
same_losses holmes megatron 12
for case in holmes megatron; do
  tag=$(tag_of "$tmp/$case.log")
  [ -n "$tag" ] && gone "$tag" || bad "$case: namespaces ${tag:-?}-* left behind" "$tmp/$case.log"
done
[ "$fail" -eq 0 ] && echo "lab_hop: ok"
exit "$fail"
