# A progress bar redrawn with carriage returns (as tqdm draws one), for tests/launch/console_test.cpp: rank 0 draws
# "bar 1" and "bar 2" without a newline (on stdout, or stderr with BAR=stderr) and waits; rank 1 waits until the
# launcher's output (the file CONSOLE) shows rank 0's latest redraw, "bar 2", says on stdout whether it did, writes
# a \r\n line and lets rank 0 end its line: with "\rbar 3\n", or with END=crlf a bare "\r\n" (print(i, end="\r")
# then print()).
import os
import sys
import time

rank = int(os.environ["RANK"])
console = os.environ["CONSOLE"]
bar = sys.stderr if os.environ.get("BAR") == "stderr" else sys.stdout
end = "\r\n" if os.environ.get("END") == "crlf" else "\rbar 3\n"
done = console + ".rank1-done"


def wait_for(test, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if test():
            return True
        time.sleep(0.05)
    return False


def console_has(text):
    with open(console, "rb") as f:
        return text in f.read()


if rank == 0:
    bar.write("\rbar 1\rbar 2")
    bar.flush()
    wait_for(lambda: os.path.exists(done))
    bar.write(end)
    bar.flush()
else:
    seen = wait_for(lambda: console_has(b"bar 2"))
    print("segment shown" if seen else "segment not shown within 30 s")
    sys.stdout.flush()
    # A line ended by \r\n, its \r read alone: one line, not a segment and an empty line.
    sys.stdout.write("crlf\r")
    sys.stdout.flush()
    time.sleep(0.3)
    sys.stdout.write("\n")
    sys.stdout.flush()
    open(done, "w").close()
