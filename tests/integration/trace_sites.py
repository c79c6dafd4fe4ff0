"""Call sites in the trace: every zone begun with a name known at compile
time (PROF_ZONE with a literal, PROF_FUNC, PROF_ZONE_BEGIN; C and C++)
carries the category "cpu,src:<file>:<line>" naming the line that began it;
a name made at run time is plain "cpu", and a string that merely begins
with a site's magic stays a name. No zone carries args, so speedscope
names every frame by the zone's name alone (issue 19: it showed
`step {"src":"app.c:25"}`), one frame per stage however many sites. Two sites of one name are one stage in
the summary (counts added) and two sources in the trace.

    python3 trace_sites.py SITES_C TRACE_CHECK_PY SITES_C_SOURCE [SITES_CPP SITES_CPP_SOURCE]
"""
import os
import re
import sys
from collections import defaultdict
from common import check, main, run, clean_env, load_trace, json_lines, stage

ARGS = sys.argv[3:]


def site_lines(source):
    """'site: NAME' comment -> line number, from the test program's source."""
    out = {}
    with open(source, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            m = re.search(r'site: (\S+)', line)
            if m:
                out[m.group(1)] = n
    return out


def sources(events):
    """zone name -> {src or None: count}."""
    import common
    got = defaultdict(lambda: defaultdict(int))
    for e in events:
        if e['ph'] == 'X':
            got[e['name']][common.trace_check.zone_site(e)] += 1
            frame = common.trace_check.speedscope_frame_name(e)
            check(frame == e['name'], f'speedscope names the frame of {e["name"]!r} {frame!r}')
    return got


def src_line(src, source):
    """The line of a src arg, checking that it names source's file."""
    check(src is not None, f'no src where one was due (file {source})')
    path, line = src.rsplit(':', 1)
    check(os.path.basename(path) == os.path.basename(source),
          f'src {src!r} does not name {os.path.basename(source)}')
    return int(line)


def test_c(tmp, prog, source):
    lines = site_lines(source)
    trace, summ = os.path.join(tmp, 'c.json'), os.path.join(tmp, 'c-summary.json')
    run([], clean_env(PROF=1, PROF_TRACE=trace, PROF_SUMMARY=summ,
                      PROF_SUMMARY_FORMAT="json"))
    got = sources(load_trace(trace))
    for name in ('outer', 'func_zone', 'begin_end'):
        check(set(got[name]) != {None}, f'{name}: no src args: {dict(got[name])}')
        (src, n), = got[name].items()
        check(src_line(src, source) == lines[name] and n == 10,
              f'{name}: src {src!r} x{n}, want line {lines[name]} x10')
    dup = {src_line(s, source): n for s, n in got['dup'].items()}
    check(dup == {lines['dup-odd']: 5, lines['dup-even']: 5},
          f'dup: sources {dict(got["dup"])}, want lines {lines["dup-odd"]} and '
          f'{lines["dup-even"]} x5 each')
    check(dict(got['runtime']) == {None: 10}, f'a run-time name has a src: {dict(got["runtime"])}')
    forged = [n for n in got if n.endswith('forged')]
    check(len(forged) == 1 and dict(got[forged[0]]) == {None: 10},
          f'the forged name: {forged} {[dict(got[n]) for n in forged]}')
    final = json_lines(summ)[-1]['total']
    d = stage(final, 'dup')
    check(d['count'] == 10 and d['parent'] == 'outer',
          f'dup: one stage of both sites under outer: {d["count"]}, parent {d["parent"]}')
    check(stage(final, 'func_zone')['parent'] == 'outer', 'func_zone not under outer')


def test_cpp(tmp, prog, source):
    lines = site_lines(source)
    trace = os.path.join(tmp, 'cpp.json')
    import common
    common.PROG = prog
    run([], clean_env(PROF=1, PROF_TRACE=trace, PROF_SUMMARY='/dev/null'))
    got = sources(load_trace(trace))
    for name in ('model::Encoder::run', 'main::lambda', 'cpp_outer'):
        check(name in got, f'no zone named {name!r}: {sorted(got)}')
        (src, n), = got[name].items()
        check(src_line(src, source) == lines[name] and n == 10,
              f'{name}: src {src!r} x{n}, want line {lines[name]} x10')


def test(tmp):
    test_c(tmp, sys.argv[1], ARGS[0])
    if len(ARGS) >= 3:
        test_cpp(tmp, os.path.abspath(ARGS[1]), ARGS[2])


main(test)
