// "Did you mean": the closest candidate to a misspelled key.
#pragma once

#include <string>
#include <vector>

namespace holmes::spec {

// Levenshtein distance (insert, delete, substitute, adjacent swap all cost 1).
int edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word` when it is close enough to be a likely typo, else "".
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace holmes::spec
