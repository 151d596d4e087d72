# One line of 80,001 bytes: "x" and 40,000 two-byte characters (é), for tests/launch/console_test.cpp: its first
# 70,000 bytes are written and flushed before the rest, so the launcher holds more than 64 KiB of the line and cuts
# it, and byte 65,536 falls inside a character: the cut must back off to its start. With BAR=1 the line starts with
# a carriage return (a progress bar, shown as it comes) and is written in pieces of 999 bytes, each splitting a
# character: what is shown must never end inside one.
import os
import sys
import time

bar = os.environ.get("BAR") == "1"
line = (("\r" if bar else "") + "x" + "\u00e9" * 40000 + "\n").encode("utf-8")
out = sys.stdout.buffer
if bar:
    for i in range(0, len(line), 999):
        out.write(line[i:i + 999])
        out.flush()
        time.sleep(0.002)
else:
    out.write(line[:70000])
    out.flush()
    time.sleep(0.5)
    out.write(line[70000:])
    out.flush()
