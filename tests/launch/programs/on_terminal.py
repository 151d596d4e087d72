# Runs `sh -c COMMAND` on a pseudo-terminal (its controlling terminal, stdin, stdout and stderr), as a user's
# shell runs a job in the foreground; types "typed" and a newline once the output holds "ready", and prints what
# the terminal showed, then "exit=<code>", or "TIMEOUT" (and the states of the processes still in the session:
# "T" is stopped) when it has not ended within LIMIT seconds (then it is killed). For supervision_test.cpp.
import os, pty, select, signal, sys, time

command, limit = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 20
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", command])
out, sent, start, status = b"", False, time.time(), None
while time.time() - start < limit:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        out += data
    if not sent and b"ready" in out:
        os.write(fd, b"typed\n")
        sent = True
    p, st = os.waitpid(pid, os.WNOHANG)
    if p:
        status = st
        break
if status is None:
    states = []
    for q in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{q}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if q.isdigit() and int(fields[3]) == pid:  # the session's processes: session id = the shell's pid
            states.append(f"{q}:{fields[0]}")
    print("TIMEOUT; states " + " ".join(states), flush=True)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(out.decode(errors="replace"))
if status is not None:
    print(f"exit={os.waitstatus_to_exitcode(status)}")
