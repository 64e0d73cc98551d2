#include "core/environment.h"

#include <cctype>

namespace lstm {

std::string gpu_folder_name(const std::string& gpu_name) {
  std::string lower;
  for (char c : gpu_name)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("h100") != std::string::npos) {
    if (lower.find("pcie") != std::string::npos) return "h100-pcie";
    if (lower.find("nvl") != std::string::npos) return "h100-nvl";
    return "h100-sxm";
  }
  if (lower.find("h200") != std::string::npos) return "h200";
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
