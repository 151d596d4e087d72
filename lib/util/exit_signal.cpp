#include "util/exit_signal.h"

#include <signal.h>
#include <stdlib.h>

#include <string>

namespace mr::util {

namespace {

volatile sig_atomic_t g_pending = 0;
struct sigaction g_old_action;
int g_installed = 0;
void on_signal(int) { g_pending = 1; }

}  // namespace

bool install_exit_signal(int sig) {
  if (g_installed == sig) return true;
  if (g_installed) restore_exit_signal();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  g_pending = 0;
  if (sigaction(sig, &sa, &g_old_action) != 0) return false;
  g_installed = sig;
  return true;
}

int exit_signal_installed() { return g_installed; }

bool exit_signal_pending() { return g_pending != 0; }

void restore_exit_signal() {
  if (g_installed) sigaction(g_installed, &g_old_action, nullptr);
  g_installed = 0;
}

void install_exit_signal_from_env() {
  const char* v = getenv(kExitSignalEnv);
  if (!v || !*v) return;
  char* end = nullptr;
  const long sig = strtol(v, &end, 10);
  if (*end || sig <= 0 || sig >= 65) return;
  if (install_exit_signal(static_cast<int>(sig)))
    if (const char* p = getenv(kExitSignalPendingEnv); p && p[0] == '1' && !p[1]) g_pending = 1;
  // The process that started this one kept the signal blocked (launch/workers.cpp, pass_exit_signal_to_exec): one
  // that came meanwhile is delivered to the latch now.
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, static_cast<int>(sig));
  sigprocmask(SIG_UNBLOCK, &m, nullptr);
}

void pass_exit_signal_to_exec() {
  if (!g_installed) return;
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, g_installed);
  sigprocmask(SIG_BLOCK, &m, nullptr);  // kept across the exec: a signal from here on waits for the next latch
  setenv(kExitSignalEnv, std::to_string(g_installed).c_str(), 1);
  if (g_pending) setenv(kExitSignalPendingEnv, "1", 1);
}

}  // namespace mr::util
