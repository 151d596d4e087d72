# Prints LINES lines of LENGTH characters each, every line written in several pieces (a write and a flush per
# piece of PIECE characters, 700 by default), so that the launcher sees partial lines from all ranks at once
# (tests/launch/console_test.cpp).
# Line i of rank R: "R:i:" followed by the letter of R repeated up to LENGTH characters.
import os
import sys

rank = int(os.environ["RANK"])
lines = int(os.environ.get("LINES", "100"))
length = int(os.environ.get("LENGTH", "3000"))
piece = int(os.environ.get("PIECE", "700"))
letter = "abcdefghijklmnopqrstuvwxyz"[rank % 26]
out = sys.stdout
for i in range(lines):
    head = "%d:%d:" % (rank, i)
    # The line's characters from `pos` to `end`, made piece by piece: a line of many MB is never held whole (the
    # test measuring the launcher's memory counts its workers' too).
    for pos in range(0, length + 1, piece):
        end = min(pos + piece, length + 1)
        chunk = head[pos:min(end, len(head))]
        chunk += letter * max(0, min(end, length) - max(pos, len(head)))
        if end > length:
            chunk += "\n"
        out.write(chunk)
        out.flush()
