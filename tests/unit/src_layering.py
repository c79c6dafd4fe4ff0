#!/usr/bin/env python3
"""src_layering.py - the layering rules of src/, checked on the source text.

src/ has one folder per floor, lowest first (FLOORS below; the order is
written once, here):

  base       helpers every floor uses, no prof state of their own to speak
             of: the lock, messages, buffers and JSON, the clock, maps
  capture    what the application's threads run: zones, rings, thread
             slots, GPU capture; it depends on nothing above it
  collect    the drain and its one dispatcher to the sinks (sink.h), self
             time, statistics, losses, GPU polling
  output     the sinks and what turns collected data into bytes: summaries,
             the trace, the live view, metrics, the cross-rank table, the
             list of sinks
  lifecycle  the collector thread's loop, start-up, fork, signals, workers
  api        the public entry points

A file's floor is its folder (src/FLOOR/name.c); include/ (prof.h,
prof_impl.h) is base. The rules:

  1. No #include cycle. The graph is every #include "..." of src/**.c and
     src/**.h, a name resolved in the including file's folder first, then
     in the floors' folders, then in include/ (the -I order of the build);
     a name found in none (a system header written with quotes) is left
     out, and a name found in two folders is an error (the -I order would
     pick one silently). A cycle is reported as the chain of files, first
     file repeated at the end.
  2. Every file has a floor (a file in src/ outside the floors' folders
     fails), and includes only headers of its own floor or lower ones.
  3. Nothing calls up: no file of src/ refers to a function that a file of a
     higher floor defines with external linkage. In particular nothing
     below the API files calls them (the PROF_API entry points); a lower
     part that needs something above gets a hook the part above installs
     (the registry's start, the runtime's exit handler, the sinks' list,
     the summary's workers).
  4. No call circle: a part (name.c with its name.h) that uses a function
     of another part of its floor is not used back by it, directly or
     through others (children.c <-> trace.c, loss.c <-> summary.c,
     fork.c <-> start.c were such circles). Rule 3 already keeps circles
     from crossing floors.

The Python extension (python/prof/*.c, one module built from one file
per part) has no floors, but rule 4 holds there too, a use counted more
widely: a part uses another when it mentions a function or an object
(Zone_Type, a cache) that the other's .c defines with external linkage,
or includes the other's header. A header no .c is named after (what
every part shares) belongs to no part.

Comments, string and character literals are removed before anything is
read. A use is any mention of the name outside a declaration: a call, or
the address taken. At file scope, `name(` is a declaration (C has no calls
there); `struct name`, `.name` and `->name` are other namespaces. In a
#define every mention counts. Calls reached only through the inline fast
path (prof_impl.h, which prof.h includes) are not seen (headers are not
expanded).

    python3 src_layering.py [SRC_DIR [INCLUDE_DIR [PYTHON_DIR]]]

SRC_DIR defaults to $PROF_TEST_SOURCE_DIR/src, INCLUDE_DIR to SRC_DIR/../include,
PYTHON_DIR (the extension's folder, python/prof) to none: not checked.
Exit 0 when the rules hold, 1 (each violation on stderr) when not, 77 when
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


# -------------------------------------------------------------------- floors

# Lowest first: a file may include and call what stands on its own floor or
# a lower one. One folder of src/ per floor.
FLOORS = ['base', 'capture', 'collect', 'output', 'lifecycle', 'api']
RANK = {name: i for i, name in enumerate(FLOORS)}

def floor_of(path, src_dir, inc_dir):
    """A file's floor: its folder's name under src/; include/ is base; None
    for a file that has none."""
    if os.path.dirname(path) == inc_dir:
        return 'base'
    rel = os.path.relpath(path, src_dir).split(os.sep)
    if len(rel) == 2 and rel[0] in RANK:
        return rel[0]
    return None


def src_files(src_dir):
    """Every .c and .h under src_dir."""
    out = []
    for root, dirs, files in os.walk(src_dir):
        dirs.sort()
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(('.c', '.h'))]
    return out


# ---------------------------------------------------------------- includes

def include_graph(src_dir, inc_dir):
    """({file: [included file, ...]}, [ambiguity message, ...]) over
    src/**.[ch] and what they reach."""
    graph, ambiguous = {}, []
    search = [os.path.join(src_dir, f) for f in FLOORS] + [src_dir, inc_dir]
    todo = src_files(src_dir)
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
            found = []
            for d in [os.path.dirname(path)] + search:
                cand = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(cand) and cand not in found:
                    found.append(cand)
            if not found:
                continue
            if len(found) > 1 and os.path.dirname(found[0]) != os.path.dirname(path):
                ambiguous.append(f'{path}: "{name}" is found in more than one folder: '
                                 + ', '.join(found))
            edges.append(found[0])
            todo.append(found[0])
        graph[path] = edges
    return graph, ambiguous


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


# ------------------------------------------------------------- calls up

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


def call_circles(graph, floor, defined):
    """Groups of parts (file names without .c/.h) that call each other
    round, as sorted lists: the strongly connected components of more
    than one part in the graph part -> parts whose functions it uses."""
    part_of = {path: os.path.splitext(os.path.basename(path))[0] for path in graph}
    owner = {name: part_of[path] for name, (_, path) in defined.items()}
    edges = {}
    for path in graph:
        if floor[path] is None:
            continue
        p = part_of[path]
        edges.setdefault(p, set())
        for _, name in uses(strip_code(read(path)), set(owner)):
            if owner[name] != p:
                edges[p].add(owner[name])
                edges.setdefault(owner[name], set())
    return strong_components(edges)


def strong_components(edges):
    """The strongly connected components of more than one node of the graph
    {node: set of nodes}, each as a sorted list."""
    # Tarjan's algorithm, without recursion.
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


# ------------------------------------------------------- the Python extension

OBJECT_RE = re.compile(r'^(?!static\b|extern\b|typedef\b|return\b)[A-Za-z_][ \t\w*]*?'
                       r'\b([A-Za-z_]\w*)[ \t]*(?:\[[^\]\n]*\][ \t]*)?(?:=|;)', re.M)
EXTERN_RE = re.compile(r'^[ \t]*extern\b[^;]*;', re.M)


def lib_objects(code):
    """Objects a file defines with external linkage: a declaration that
    starts a line at file scope (`PyTypeObject Zone_Type = {`,
    `PyObject *zone_cache;`), neither static, extern nor a typedef."""
    return {m.group(1) for m in OBJECT_RE.finditer(code)}


def extension_circles(py_dir):
    """(parts, circles) of the extension's files: as call_circles(), a part
    using another also by an object it defines or by including its
    header (extern declarations are no use)."""
    files = sorted(os.path.join(py_dir, f) for f in os.listdir(py_dir)
                   if f.endswith(('.c', '.h')))
    code = {path: strip_code(read(path)) for path in files}
    part_of = {path: os.path.splitext(os.path.basename(path))[0] for path in files}
    parts = {part_of[p] for p in files if p.endswith('.c')}
    owner = {}
    for path in files:
        if path.endswith('.c'):
            for name in lib_functions(code[path]) | lib_objects(code[path]):
                owner[name] = part_of[path]
    edges = {p: set() for p in parts}
    for path in files:
        p = part_of[path]
        if p not in parts:
            continue
        raw = read(path)
        for m in INCLUDE_RE.finditer(code[path]):
            q = os.path.splitext(raw[m.start(1):m.end(1)])[0]
            if q in parts and q != p:
                edges[p].add(q)
        text = EXTERN_RE.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), code[path])
        for _, name in uses(text, set(owner)):
            if owner[name] != p:
                edges[p].add(owner[name])
    return parts, strong_components(edges)


# --------------------------------------------------------------------- main

def main():
    src_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get('PROF_TEST_SOURCE_DIR', '.'), 'src')
    inc_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(src_dir, '..', 'include')
    src_dir, inc_dir = os.path.abspath(src_dir), os.path.abspath(inc_dir)
    if not os.path.isdir(src_dir) or not any(
            os.path.basename(f) == 'api.c' for f in src_files(src_dir)):
        print(f'SKIP: no src/ with api.c at {src_dir}', file=sys.stderr)
        return 77
    bad = []

    def rel(p):
        return os.path.relpath(p, os.path.dirname(src_dir))

    # 1. includes: resolved once, no cycle.
    graph, ambiguous = include_graph(src_dir, inc_dir)
    bad += [f'{rel(m.split(":")[0])}:{m.split(":", 1)[1]}' for m in ambiguous]
    cycle = find_cycle(graph)
    if cycle:
        bad.append('include cycle: ' + ' -> '.join(rel(p) for p in cycle))
    print(f'{len(graph)} files, {sum(len(e) for e in graph.values())} includes, '
          f'{"a cycle" if cycle else "no cycle"}')

    # 2. floors: every file has one, includes go down or sideways.
    floor = {p: floor_of(p, src_dir, inc_dir) for p in graph}
    count = {f: 0 for f in FLOORS}
    for path in sorted(graph):
        f = floor[path]
        if f is None:
            bad.append(f'{rel(path)}: has no floor: put it in one of src/{{{",".join(FLOORS)}}}/')
            continue
        count[f] += 1
        for inc in graph[path]:
            g = floor[inc]
            if g is not None and RANK[g] > RANK[f]:
                bad.append(f'{rel(path)}: includes {rel(inc)} ({g}) from the {f} floor')
    print('floors, lowest first: ' + ', '.join(f'{f} {count[f]}' for f in FLOORS))

    # 3. calls: nothing uses a function a higher floor defines.
    defined = {}    # name -> (floor, file)
    for path in sorted(graph):
        if path.endswith('.c') and floor[path] is not None:
            for name in lib_functions(strip_code(read(path))):
                defined[name] = (floor[path], path)
    api = {n for n, (f, _) in defined.items() if f == 'api'}
    if not {'prof_enable', 'prof_flush', 'prof_ranks_start'} <= api:
        # The parser must see what the API files are known to define, or
        # the check below proves nothing.
        print('cannot read the functions the API files define (found: %s)' % sorted(api),
              file=sys.stderr)
        return 1
    ncalls = 0
    for path in sorted(graph):
        f = floor[path]
        # include/ is the API's own declaration (its macros are the user's
        # code): only src/ is checked.
        if f is None or f == FLOORS[-1] or os.path.dirname(path) == inc_dir:
            continue
        above = {n for n, (g, _) in defined.items() if RANK[g] > RANK[f]}
        for line, name in uses(strip_code(read(path)), above):
            g, where = defined[name]
            bad.append(f'{rel(path)}:{line}: uses {name}(), which {rel(where)} defines: '
                       f'the {g} floor is above the {f} floor (install a hook from above)')
            ncalls += 1
    print(f'{len(defined)} functions with external linkage, {len(api)} of them the API\'s; '
          f'{ncalls} uses of a higher floor\'s')

    # 4. no call circle between parts.
    circles = call_circles(graph, floor, defined)
    for comp in circles:
        bad.append('call circle: ' + ' <-> '.join(comp) + ' (each uses a function of the next; '
                   'one of them must not: a hook, or a helper moved down)')
    print(f'{len(circles)} call circles between parts')

    # The extension's files: no circle either.
    if len(sys.argv) > 3:
        py_dir = os.path.abspath(sys.argv[3])
        parts, circles = extension_circles(py_dir)
        for comp in circles:
            bad.append(f'{rel(py_dir)}: call circle: ' + ' <-> '.join(comp) +
                       ' (each uses a function, an object or the header of the next; one of '
                       'them must not: a header of what they share, or an init call)')
        print(f'{rel(py_dir)}: {len(parts)} parts, {len(circles)} call circles')

    for msg in bad:
        print(msg, file=sys.stderr)
    print(f'{len(graph)} files on {len(FLOORS)} floors, {len(bad)} violations')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
