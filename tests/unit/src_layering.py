#!/usr/bin/env python3
"""src_layering.py - the layering rules of src/, checked on the source text.

  1. No #include cycle. The graph is every #include "..." of src/*.c and
     src/*.h, a name resolved in src/ first and include/ second (the -I
     order of the build); a name found in neither (a system header written
     with quotes) is left out. A cycle is reported as the chain of files,
     first file repeated at the end.
  2. Nothing in src/ calls up into the API layer: no file in src/ other
     than the API files (api*.c) refers to a function that one of them
     defines with external linkage (the PROF_API entry points). They are
     the top: they may call everything below them, and nothing below may
     call them. Lower parts that need the API layer get a hook it installs
     (the registry's start, the runtime's exit handler).
  3. Floors (docs/ARCHITECTURE.md): every part of src/ has one (FLOORS
     below) and includes only the headers of its own floor or lower ones:
       base     helpers every floor uses: the lock, messages, buffers, clock
       capture  what the application's threads run: zones, rings, thread
                slots, GPU capture; it depends on nothing above it
       collect, output, process
                the collector, its drain and sinks, statistics, self time,
                trace text; summaries, the trace writer, the live view, the
                cross-rank table; start-up, fork and signals. One level:
                the collector drives the outputs, and is started, forked
                and stopped by the process part.
       api      the public entry points
     A new file must be given a floor here, or this test fails.

Comments, string and character literals are removed before anything is
read. A use is any mention of the name outside a declaration: a call, or
the address taken. At file scope, `name(` is a declaration (C has no calls
there); `struct name`, `.name` and `->name` are other namespaces. In a
#define every mention counts. Calls reached only through the inline fast
path (prof_impl.h, which prof.h includes) are not seen (headers are not
expanded).

    python3 src_layering.py [SRC_DIR [INCLUDE_DIR]]

SRC_DIR defaults to $PROF_TEST_SOURCE_DIR/src, INCLUDE_DIR to SRC_DIR/../include.
Exit 0 when both rules hold, 1 (each violation on stderr) when not, 77 when
the directories are missing.
"""
import os
import re
import sys

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
IDENT_RE = re.compile(r'[A-Za-z_]\w*')
TOKEN_RE = re.compile(r'[A-Za-z_]\w*|->|\S')


def strip_code(text):
    """Comments, strings and char literals blanked; newlines kept, so that
    line numbers still hold."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            if j < n and text[j] == c:
                out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j]) + c)
                j += 1
            else:   # unterminated: keep the newline
                j = min(j, n)
                out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def read(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return f.read()


# ---------------------------------------------------------------- includes

def include_graph(src_dir, inc_dir):
    """{file: [included file, ...]} over src/*.[ch] and what they reach."""
    graph = {}
    todo = sorted(os.path.join(src_dir, f) for f in os.listdir(src_dir)
                  if f.endswith(('.c', '.h')))
    while todo:
        path = todo.pop()
        if path in graph:
            continue
        edges = []
        # Only the text outside comments (a commented-out #include is none).
        code = strip_code(read(path))
        raw = read(path)
        for m in INCLUDE_RE.finditer(code):
            # The name itself was blanked as a string: take it from the raw
            # text at the same offsets.
            name = raw[m.start(1):m.end(1)]
            for d in (os.path.dirname(path), src_dir, inc_dir):
                cand = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(cand):
                    edges.append(cand)
                    todo.append(cand)
                    break
        graph[path] = edges
    return graph


def find_cycle(graph):
    """One cycle as a list of files (first repeated last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {v: WHITE for v in graph}
    for root in sorted(graph):
        if colour[root] != WHITE:
            continue
        stack = [(root, iter(graph[root]))]
        path = [root]
        colour[root] = GREY
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                colour[v] = BLACK
                stack.pop()
                path.pop()
            elif colour.get(w, BLACK) == GREY:
                return path[path.index(w):] + [w]
            elif colour.get(w) == WHITE:
                colour[w] = GREY
                stack.append((w, iter(graph[w])))
                path.append(w)
    return None


# ------------------------------------------------------ calls into the API

def lib_functions(code):
    """Functions a file defines with external linkage: a definition at brace
    depth 0 (`name (...)` followed by `{`) whose specifiers, back to the
    previous `;`, `}` or preprocessor line, do not say static."""
    names = set()
    depth = 0
    spec_start = 0
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == '#' and (i == 0 or code[code.rfind('\n', 0, i) + 1:i].strip() == ''):
            j = i
            while True:   # a directive and its continuation lines
                k = code.find('\n', j)
                if k < 0:
                    k = n
                    break
                if code[k - 1] != '\\':
                    break
                j = k + 1
            i = k
            spec_start = i
            continue
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                spec_start = i + 1
        elif c == ';' and depth == 0:
            spec_start = i + 1
        elif c == '(' and depth == 0:
            m = re.search(r'([A-Za-z_]\w*)\s*$', code[spec_start:i])
            # The matching ')' and what follows it.
            level, j = 0, i
            while j < n:
                if code[j] == '(':
                    level += 1
                elif code[j] == ')':
                    level -= 1
                    if level == 0:
                        break
                j += 1
            rest = code[j + 1:].lstrip()
            if m and rest.startswith('{') and m.group(1) != '__attribute__':
                specs = code[spec_start:i]
                if not re.search(r'\bstatic\b', specs):
                    names.add(m.group(1))
            i = j + 1
            continue
        i += 1
    return names


def uses(code, names):
    """(line, name) for each use of one of names in code."""
    found = []
    depth = 0
    prev = None
    line = 1
    pos = 0
    directive = False
    for m in re.finditer(r'\n|#|[A-Za-z_]\w*|->|[^\s\w]', code):
        tok = m.group(0)
        if tok == '\n':
            line += 1
            # A directive ends at a newline that is not escaped.
            if directive and code[m.start() - 1:m.start()] != '\\':
                directive = False
            continue
        if tok == '#' and code[code.rfind('\n', 0, m.start()) + 1:m.start()].strip() == '':
            directive = True
        elif tok == '{' and not directive:
            depth += 1
        elif tok == '}' and not directive:
            depth -= 1
        elif tok in names and prev not in ('struct', 'union', 'enum', '.', '->'):
            after = code[m.end():].lstrip()[:1]
            if directive or depth > 0 or after != '(':
                found.append((line, tok))
        prev = tok
    return found


# -------------------------------------------------------------------- floors

BASE, CAPTURE, MIDDLE, API = 0, 1, 2, 3
FLOOR_NAMES = {BASE: 'base', CAPTURE: 'capture', MIDDLE: 'collect/output/process', API: 'api'}
FLOORS = {
    BASE: ('clock digits env fdio hist intern json log map order process runtime slab '
           'prof prof_impl prof_version'),
    CAPTURE: 'cuda cuda_driver cuda_pool nvtx registry ring ring_room site wake zone',
    MIDDLE: ('collector cuda_poll gpu_busy loss nvml selftime sink stats trace writer '
             'children gz live metrics ranks summary summary_out trace_out '
             'fork signals sigchain start'),
    API: 'api api_ranks api_results',
}
PART_FLOOR = {name: floor for floor, names in FLOORS.items() for name in names.split()}


def part(path):
    """A file's part: its name without .c/.h (src/ and include/ alike)."""
    return os.path.splitext(os.path.basename(path))[0]


def floor_violations(graph, rel):
    """Messages for files with no floor, and includes of a higher floor."""
    out = []
    for path in sorted(graph):
        p = part(path)
        if p not in PART_FLOOR:
            out.append(f'{rel(path)}: has no floor in src_layering.py FLOORS')
            continue
        for inc in graph[path]:
            q = part(inc)
            if q in PART_FLOOR and PART_FLOOR[q] > PART_FLOOR[p]:
                out.append(f'{rel(path)}: includes {os.path.basename(inc)} '
                           f'({FLOOR_NAMES[PART_FLOOR[q]]}) from the '
                           f'{FLOOR_NAMES[PART_FLOOR[p]]} floor')
    return out


def main():
    src_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get('PROF_TEST_SOURCE_DIR', '.'), 'src')
    inc_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(src_dir, '..', 'include')
    src_dir, inc_dir = os.path.abspath(src_dir), os.path.abspath(inc_dir)
    api_files = []
    if os.path.isdir(src_dir):
        api_files = sorted(os.path.join(src_dir, f) for f in os.listdir(src_dir)
                           if re.fullmatch(r'api(_\w+)?\.c', f))
    if not api_files:
        print(f'SKIP: no src/ with api.c at {src_dir}', file=sys.stderr)
        return 77
    failed = 0

    def rel(p):
        return os.path.relpath(p, os.path.dirname(src_dir))

    graph = include_graph(src_dir, inc_dir)
    cycle = find_cycle(graph)
    if cycle:
        print('include cycle: ' + ' -> '.join(rel(p) for p in cycle), file=sys.stderr)
        failed = 1
    print(f'{len(graph)} files, {sum(len(e) for e in graph.values())} includes, '
          f'{"a cycle" if cycle else "no cycle"}')

    api = {}
    for path in api_files:
        for name in lib_functions(strip_code(read(path))):
            api[name] = os.path.basename(path)
    if not {'prof_enable', 'prof_flush', 'prof_ranks_start'} <= set(api):
        # The parser must see what the API files are known to define, or
        # the check below proves nothing.
        print('cannot read the functions the API files define (found: %s)' % sorted(api),
              file=sys.stderr)
        return 1
    ncalls = 0
    for f in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, f)
        if path in api_files or not f.endswith(('.c', '.h')):
            continue
        for line, name in uses(strip_code(read(path)), set(api)):
            print(f'{rel(path)}:{line}: uses {name}(), which {api[name]} defines: the API '
                  f'layer is above every other part of src/', file=sys.stderr)
            failed = 1
            ncalls += 1
    print(f'the API files define {len(api)} functions with external linkage; '
          f'{ncalls} uses of them elsewhere in src/')

    bad = floor_violations(graph, rel)
    for msg in bad:
        print(msg, file=sys.stderr)
    print(f'{len(graph)} files on {len(FLOORS)} floors, {len(bad)} out of place')
    return 1 if bad else failed


if __name__ == '__main__':
    sys.exit(main())
