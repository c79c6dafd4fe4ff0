"""pipe_reader.py - the reading end of a pipe a test holds for a program under
test (flush_stuck.py, writer_stall.py)."""
import os


def read_all(fd, into):
    """Read fd (blocking) to its end into the list `into`."""
    os.set_blocking(fd, True)
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        into.append(b)
    os.close(fd)
