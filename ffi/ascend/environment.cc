#include "environment.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "aclnn_api.h"

namespace gs_ascend {
namespace {

std::mutex g_mutex;
std::optional<Environment> g_environment;  // guarded by g_mutex

std::string Variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

Environment Read() { return {Variable(kLibrariesEnvVar), Variable(kDeterministicEnvVar)}; }

}  // namespace

Environment CurrentEnvironment() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_environment.has_value()) g_environment = Read();
  return *g_environment;
}

void RereadEnvironment() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_environment = Read();
}

}  // namespace gs_ascend
