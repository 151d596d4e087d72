# Prints LINES lines of LENGTH characters each, every line written in several pieces (a write and a flush per
# piece), so that the launcher sees partial lines from all ranks at once (tests/launch/console_test.cpp).
# Line i of rank R: "R:i:" followed by the letter of R repeated up to LENGTH characters.
import os
import sys

rank = int(os.environ["RANK"])
lines = int(os.environ.get("LINES", "100"))
length = int(os.environ.get("LENGTH", "3000"))
letter = "abcdefghijklmnopqrstuvwxyz"[rank % 26]
out = sys.stdout
for i in range(lines):
    head = "%d:%d:" % (rank, i)
    line = head + letter * (length - len(head)) + "\n"
    for k in range(0, len(line), 700):
        out.write(line[k:k + 700])
        out.flush()
