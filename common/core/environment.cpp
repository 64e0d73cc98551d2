#include "core/environment.h"

#include <cctype>

namespace lstm {

namespace {
/// Whether `word` stands in `text` as a word of its own (not inside "gh200").
bool has_word(const std::string& text, const std::string& word) {
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if ((at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]))) &&
        (end == text.size() || !std::isalnum(static_cast<unsigned char>(text[end]))))
      return true;
  }
  return false;
}
}  // namespace

std::string gpu_folder_name(const std::string& gpu_name) {
  std::string lower;
  for (char c : gpu_name)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (has_word(lower, "h100")) {
    if (lower.find("pcie") != std::string::npos) return "h100-pcie";
    if (lower.find("nvl") != std::string::npos) return "h100-nvl";
    return "h100-sxm";
  }
  if (has_word(lower, "h200")) return "h200";
  std::string folder;
  for (char c : lower) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c));
    if (keep) {
      folder += c;
    } else if (!folder.empty() && folder.back() != '-') {
      folder += '-';
    }
  }
  if (folder.rfind("nvidia-", 0) == 0) folder = folder.substr(7);
  while (!folder.empty() && folder.back() == '-')
    folder.pop_back();
  return folder.empty() ? "unknown-gpu" : folder;
}

}  // namespace lstm
