"""Small synthetic Python modules for the training mix (project-authored generator, deterministic).

Every function and class gets randomly named parameters and locals that its body reuses (loops,
conditionals, accumulations, returns, docstrings, calls of functions defined earlier in the same
module), so predicting an identifier mostly means copying it from the signature a few lines up:
the pattern a KV cache serves for code. Every generated module is checked with ast.parse.
"""
import ast

NOUNS = ("value item number word name line row count total price score size width height index key text "
         "point record entry node user order file path char token step limit factor weight amount rate level "
         "color city animal book card cell task event message result data part piece box page note star").split()
PLURAL = {"box": "boxes", "city": "cities", "entry": "entries", "child": "children", "match": "matches"}
VERBS = ("scale count find filter sum merge split clean build make load parse check update compute collect "
         "average double pick sort group format join clip shift score rank read write draw move add remove "
         "get set show print pack flatten reverse normalize total measure").split()
ADJ = "max min new old first last next best top raw clean small big total valid good empty".split()
SYL = "ba ko ri mu zel ta pix no fa lo qu ve dra sim ul tor ka bex ni po".split()
OPS = ["+", "-", "*"]
CMPS = [">", "<", ">=", "<=", "==", "!="]


def plural(n):
    return PLURAL.get(n, n[:-1] + "ies" if n.endswith("y") and n[-2] not in "aeiou" else n + "s")


class Names:
    """Identifier source; keeps names unique inside one module. With `words` (an open word list), half of
    the identifiers are built from it, so a body's names can only be copied from its signature, not
    recalled from the generator's small vocabulary."""

    def __init__(self, rng, words=None):
        self.rng, self.used, self.words = rng, set(), words

    def open_word(self):
        r = self.rng
        if r.random() < 0.1:
            return r.choice("abcdefghijkmnpqrstuvwxyz")
        w = r.choice(self.words)
        return w if r.random() < 0.7 else (r.choice(ADJ + self.words) + "_" + w)

    def fresh(self, make):
        for _ in range(50):
            n = make()
            if n not in self.used and n.isidentifier() and n not in ("list", "dict", "set", "str", "int", "sum",
                                                                    "max", "min", "len", "print", "sorted"):
                self.used.add(n)
                return n
        n = make() + str(len(self.used))
        self.used.add(n)
        return n

    def noun(self):
        r = self.rng
        if self.words and r.random() < 0.5:
            return self.fresh(self.open_word)
        return self.fresh(lambda: r.choice(NOUNS) if r.random() < 0.6 else
                          (r.choice(ADJ) + "_" + r.choice(NOUNS) if r.random() < 0.8 else
                           r.choice(SYL) + r.choice(SYL) + r.choice(["", "_" + r.choice(NOUNS)])))

    def plural(self):
        r = self.rng
        if self.words and r.random() < 0.5:
            return self.fresh(lambda: plural(r.choice(self.words)))
        return self.fresh(lambda: plural(r.choice(NOUNS)) if r.random() < 0.7 else
                          r.choice(ADJ) + "_" + plural(r.choice(NOUNS)))

    def func(self, verbs=None):
        r = self.rng
        if self.words and r.random() < 0.5:
            return self.fresh(lambda: r.choice(self.words) if r.random() < 0.3 else
                              r.choice(verbs or VERBS) + "_" + r.choice(self.words))
        return self.fresh(lambda: r.choice(verbs if verbs and r.random() < 0.8 else VERBS) +
                          ("_" + r.choice([r.choice(NOUNS), plural(r.choice(NOUNS))]) if r.random() < 0.6 else ""))

    def cls(self):
        r = self.rng
        return self.fresh(lambda: "".join(w.capitalize() for w in
                                          [r.choice(ADJ + NOUNS)] * (r.random() < 0.4) + [r.choice(NOUNS)]) +
                          r.choice(["", "", "Counter", "Store", "List", "Box", "Tracker"]))


def num(rng):
    return str(rng.choice([0, 1, 2, 3, 5, 10, 100, rng.randint(2, 50)]))


def doc(rng, text, ind):
    return [f'{ind}"""{text}"""'] if rng.random() < 0.6 else ([f"{ind}# {text}"] if rng.random() < 0.3 else [])


# Each template returns (lines, signature) where signature = (name, number of args, returns a list?)

def t_accumulate(rng, nm, ind):
    f, xs, k, x, acc = nm.func("total sum add accumulate combine".split()), nm.plural(), nm.noun(), nm.noun(), nm.fresh(lambda: rng.choice(["total", "result", "acc", "running", "out_sum"]))
    op = rng.choice(OPS)
    L = [f"{ind}def {f}({xs}, {k}):"] + doc(rng, f"Return the sum of {xs} {op} {k}.", ind + "    ")
    L += [f"{ind}    {acc} = 0", f"{ind}    for {x} in {xs}:", f"{ind}        {acc} += {x} {op} {k}", f"{ind}    return {acc}"]
    return L, (f, 2, False)


def t_filter(rng, nm, ind):
    f, xs, lim, x, out = nm.func("filter keep select pick drop".split()), nm.plural(), nm.noun(), nm.noun(), nm.plural()
    c = rng.choice(CMPS)
    L = [f"{ind}def {f}({xs}, {lim}):"] + doc(rng, f"Keep the {xs} that are {c} {lim}.", ind + "    ")
    if rng.random() < 0.4:
        L += [f"{ind}    return [{x} for {x} in {xs} if {x} {c} {lim}]"]
    else:
        L += [f"{ind}    {out} = []", f"{ind}    for {x} in {xs}:", f"{ind}        if {x} {c} {lim}:",
              f"{ind}            {out}.append({x})", f"{ind}    return {out}"]
    return L, (f, 2, True)


def t_scale(rng, nm, ind):
    f, xs, k, x = nm.func("scale double multiply shift convert apply".split()), nm.plural(), nm.noun(), nm.noun()
    op = rng.choice(OPS + ["/", "//"])
    L = [f"{ind}def {f}({xs}, {k}):"] + doc(rng, f"Apply {op} {k} to every item of {xs}.", ind + "    ")
    if rng.random() < 0.5:
        L += [f"{ind}    return [{x} {op} {k} for {x} in {xs}]"]
    else:
        r = nm.plural()
        L += [f"{ind}    {r} = []", f"{ind}    for {x} in {xs}:", f"{ind}        {r}.append({x} {op} {k})",
              f"{ind}    return {r}"]
    return L, (f, 2, True)


def t_count(rng, nm, ind):
    f, ws, p, w, n = nm.func("count count tally find".split()), nm.plural(), nm.noun(), nm.noun(), nm.fresh(lambda: rng.choice(["count", "n", "hits", "found"]))
    test = rng.choice([f"{w}.startswith({p})", f"{w}.endswith({p})", f"{p} in {w}", f"{w} == {p}"])
    L = [f"{ind}def {f}({ws}, {p}):"] + doc(rng, f"Count the {ws} where {test}.", ind + "    ")
    L += [f"{ind}    {n} = 0", f"{ind}    for {w} in {ws}:", f"{ind}        if {test}:", f"{ind}            {n} += 1",
          f"{ind}    return {n}"]
    return L, (f, 2, False)


def t_tally(rng, nm, ind):
    f, ws, w, d = nm.func("count tally histogram group".split()), nm.plural(), nm.noun(), nm.fresh(lambda: rng.choice(["counts", "seen", "table", "freq", "tally"]))
    L = [f"{ind}def {f}({ws}):"] + doc(rng, f"Map each of the {ws} to how often it occurs.", ind + "    ")
    L += [f"{ind}    {d} = {{}}", f"{ind}    for {w} in {ws}:"]
    L += [f"{ind}        {d}[{w}] = {d}.get({w}, 0) + 1"] if rng.random() < 0.6 else \
         [f"{ind}        if {w} not in {d}:", f"{ind}            {d}[{w}] = 0", f"{ind}        {d}[{w}] += 1"]
    L += [f"{ind}    return {d}"]
    return L, (f, 1, False)


def t_best(rng, nm, ind):
    f, xs, x, b = nm.func("find_best largest smallest best pick".split()), nm.plural(), nm.noun(), nm.fresh(lambda: rng.choice(["best", "largest", "smallest", "top"]))
    c = rng.choice([">", "<"])
    L = [f"{ind}def {f}({xs}):"] + doc(rng, f"Return the {'largest' if c == '>' else 'smallest'} of {xs}, or None.", ind + "    ")
    L += [f"{ind}    {b} = None", f"{ind}    for {x} in {xs}:", f"{ind}        if {b} is None or {x} {c} {b}:",
          f"{ind}            {b} = {x}", f"{ind}    return {b}"]
    return L, (f, 1, False)


def t_while(rng, nm, ind):
    f, s, lim, n, steps = nm.func("steps_until grow count_steps double_until".split()), nm.noun(), nm.noun(), nm.noun(), nm.fresh(lambda: rng.choice(["steps", "rounds", "i", "tries"]))
    op = rng.choice(["*= 2", "+= 1", "+= 3", "*= 3"])
    L = [f"{ind}def {f}({s}, {lim}):"] + doc(rng, f"Count the steps until {s} reaches {lim}.", ind + "    ")
    L += [f"{ind}    {n} = {s}", f"{ind}    {steps} = 0", f"{ind}    while {n} < {lim}:", f"{ind}        {n} {op}",
          f"{ind}        {steps} += 1", f"{ind}    return {steps}"]
    return L, (f, 2, False)


def t_format(rng, nm, ind):
    f, a, b = nm.func("format describe show label render".split()), nm.noun(), nm.noun()
    L = [f"{ind}def {f}({a}, {b}):"] + doc(rng, f"Describe {a} and {b} as text.", ind + "    ")
    L += [rng.choice([f'{ind}    return f"{{{a}}}: {{{b}}}"', f'{ind}    return "{a}=" + str({a}) + ", {b}=" + str({b})',
                      f'{ind}    return "{{}} ({{}})".format({a}, {b})'])]
    return L, (f, 2, False)


def t_branch(rng, nm, ind):
    f, x, lo, hi = nm.func("clamp clip limit bound".split()), nm.noun(), nm.noun(), nm.noun()
    L = [f"{ind}def {f}({x}, {lo}, {hi}):"] + doc(rng, f"Clamp {x} between {lo} and {hi}.", ind + "    ")
    L += [f"{ind}    if {x} < {lo}:", f"{ind}        return {lo}", f"{ind}    elif {x} > {hi}:", f"{ind}        return {hi}"]
    L += [f"{ind}    else:", f"{ind}        return {x}"] if rng.random() < 0.5 else [f"{ind}    return {x}"]
    return L, (f, 3, False)


def t_pairs(rng, nm, ind):
    f, xs, ys, x, y, out = nm.func("combine zip_with merge pair add".split()), nm.plural(), nm.plural(), nm.noun(), nm.noun(), nm.plural()
    op = rng.choice(OPS)
    L = [f"{ind}def {f}({xs}, {ys}):"] + doc(rng, f"Combine {xs} and {ys} pairwise.", ind + "    ")
    if rng.random() < 0.5:
        L += [f"{ind}    return [{x} {op} {y} for {x}, {y} in zip({xs}, {ys})]"]
    else:
        L += [f"{ind}    {out} = []", f"{ind}    for {x}, {y} in zip({xs}, {ys}):", f"{ind}        {out}.append({x} {op} {y})",
              f"{ind}    return {out}"]
    return L, (f, 2, True)


def t_index(rng, nm, ind):
    f, xs, t, i = nm.func("index_of find position locate".split()), nm.plural(), nm.noun(), nm.fresh(lambda: rng.choice(["i", "idx", "pos", "j"]))
    L = [f"{ind}def {f}({xs}, {t}):"] + doc(rng, f"Return the position of {t} in {xs}, or -1.", ind + "    ")
    L += [f"{ind}    for {i} in range(len({xs})):", f"{ind}        if {xs}[{i}] == {t}:", f"{ind}            return {i}",
          f"{ind}    return -1"]
    return L, (f, 2, False)


FUNCS = [t_accumulate, t_filter, t_scale, t_count, t_tally, t_best, t_while, t_format, t_branch, t_pairs, t_index]


def t_class(rng, nm, funcs):
    c, attr, arg, amt = nm.cls(), nm.plural(), nm.noun(), nm.noun()
    kind = rng.random()
    L = [f"class {c}:"] + doc(rng, f"Keep track of {attr}.", "    ")
    L += [f"    def __init__(self, {arg}):", f"        self.{arg} = {arg}", f"        self.{attr} = []", ""]
    m1, m2 = nm.func(), nm.func()
    L += [f"    def {m1}(self, {amt}):", f"        self.{attr}.append({amt})"]
    L += [f"        return len(self.{attr})", ""] if kind < 0.5 else [f"        self.{arg} += {amt}", f"        return self.{arg}", ""]
    x = nm.noun()
    L += [f"    def {m2}(self):"] + doc(rng, f"Return the {attr} times {arg}.", "        ")
    L += [f"        return [{x} * self.{arg} for {x} in self.{attr}]"] if rng.random() < 0.5 else \
         [f"        total = 0", f"        for {x} in self.{attr}:", f"            total += {x}", f"        return total + self.{arg}"]
    if rng.random() < 0.4:
        L += ["", "    def __repr__(self):", f'        return f"{c}({{self.{arg}!r}}, {{len(self.{attr})}} {attr})"']
    inst = nm.fresh(lambda: c.lower()[:12] if rng.random() < 0.5 else "obj")
    use = [f"    {inst} = {c}({num(rng)})", f"    {inst}.{m1}({num(rng)})", f"    {inst}.{m1}({num(rng)})",
           f"    print({inst}.{m2}())"]
    return L, use


def literal(rng, n_args, sig_list):
    vals = [f"[{', '.join(num(rng) for _ in range(rng.randint(2, 5)))}]", num(rng), num(rng)]
    if rng.random() < 0.3:
        vals[0] = "[" + ", ".join(repr(w) for w in rng.sample(NOUNS, rng.randint(2, 4))) + "]"
        vals[1] = repr(rng.choice(NOUNS)[:2])
    return vals[:n_args]


def module(rng, words=None):
    """One small module: imports, 2-5 functions (maybe a class), and a main() that calls them; `words`:
    see Names."""
    nm = Names(rng, words)
    L = []
    if rng.random() < 0.4:
        L += rng.sample(["import math", "import os", "import sys", "import random", "from collections import Counter",
                         "import json", "import re"], rng.randint(1, 2)) + ["", ""]
    if rng.random() < 0.3:
        L += [f'"""{rng.choice(["Small helpers for", "Utilities for", "Tools to work with"])} '
              f'{plural(rng.choice(NOUNS))}."""', ""]
    sigs, uses = [], []
    for _ in range(rng.randint(2, 5)):
        lines, sig = rng.choice(FUNCS)(rng, nm, "")
        L += lines + ["", ""]
        sigs.append(sig)
    if rng.random() < 0.3:
        lines, use = t_class(rng, nm, sigs)
        L += lines + ["", ""]
        uses += use
    if rng.random() < 0.75:
        main = nm.fresh(lambda: rng.choice(["main", "demo", "run", "example"]))
        L += [f"def {main}():"]
        for f, n, _ in rng.sample(sigs, min(len(sigs), rng.randint(1, 3))):
            args = literal(rng, n, sigs)
            if rng.random() < 0.5:
                v = nm.noun()
                L += [f"    {v} = {f}({', '.join(args)})", f"    print({v})"]
            else:
                L += [f"    print({f}({', '.join(args)}))"]
        L += uses
        if rng.random() < 0.7:
            L += ["", "", 'if __name__ == "__main__":', f"    {main}()"]
    text = "\n".join(L).rstrip() + "\n"
    ast.parse(text)
    return text
