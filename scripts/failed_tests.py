#!/usr/bin/env python3
"""failed_tests.py TESTLOG.json - one line naming the tests that failed in
a meson test run (its meson-logs/testlog.json), each with the first line of
its output that says why (a FAIL:/FAILED line, an assertion, an error), for
the table at the end of scripts/test.sh. Prints nothing when none failed."""
import json
import re
import sys

# check.h's "FILE:LINE: check failed: ..." included: a C test's reason.
WHY = re.compile(r"^(FAIL|FAILED|ERROR|E  |AssertionError|.*Error:|.*error:|not ok|"
                 r".*check failed)")
SHOWN = 3


def main():
    failed = []
    try:
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    t = json.loads(line)
                except ValueError:
                    continue
                if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
                    continue
                name = re.sub(r"^[^:]*:", "", t.get("name", "?")).replace(" / ", "/")
                why = ""
                output = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
                for out in output.splitlines():
                    if WHY.match(out.strip()):
                        why = out.strip()
                        break
                what = name if t.get("result") == "FAIL" else "%s (%s)" % (name, t.get("result"))
                failed.append("%s%s" % (what, ": " + why[:100] if why else ""))
    except OSError:
        return
    if failed:
        more = len(failed) - SHOWN
        print("; ".join(failed[:SHOWN]) + ("; and %d more" % more if more > 0 else ""))


main()
