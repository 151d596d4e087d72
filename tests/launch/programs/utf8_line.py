# One line of 80,001 bytes: "x" and 40,000 two-byte characters (é), for tests/launch/console_test.cpp: its first
# 70,000 bytes are written and flushed before the rest, so the launcher holds more than 64 KiB of the line and cuts
# it, and byte 65,536 falls inside a character: the cut must back off to its start.
import sys
import time

line = ("x" + "\u00e9" * 40000 + "\n").encode("utf-8")
out = sys.stdout.buffer
out.write(line[:70000])
out.flush()
time.sleep(0.5)
out.write(line[70000:])
out.flush()
