#!/usr/bin/python3
"""Build kvscope's default-model training corpus, deterministically from a seed.

Parts, each written as documents separated by the literal "<|endoftext|>":
  stories : children's stories from gen_stories.py (project-authored). Names come from an open-ended
            syllable generator, so most names occur in one story only: predicting a name's second
            mention requires copying its first one (what grows induction/copy heads).
  facts   : country / capital / continent / language sentences from the MIT-licensed npm package
            `countries-list` (fetched with `npm pack` into work/npm).
  code    : small synthetic Python modules from gen_code.py (project-authored; every one parses).
  stdlib  : Python standard library sources shipped by Debian (/usr/lib/python3.11/*.py, PSF).
  english : WordNet 3.0 example sentences and definitions (Debian package wordnet-base,
            WordNet 3.0 licence), for everyday English outside the templates.
  names   : more stories from gen_stories.py whose names are spelled from random letters, so the pieces
            of a name follow no learnable pattern and its later mentions can only be copied from the
            first (training only: no held-out slice; the hand-written name prompts measure it).
  coderecall: code from gen_code.py whose identifiers are half built from WordNet's lemmas (an open
            vocabulary), so a body's names must be copied from the signature (training only).
  recall  : stories (gen_stories.recall_story) whose hero's name, spelled or syllable-made, comes back in
            the next sentence and often after; never one of the held-out prompts' names (training only).
  heroes  : recall stories opened in many more ways (gen_heroes.py: the name first, with a title, as a pet,
            in apposition), with spelled, syllable and longer story-book names (training only).

Outputs:
  work/data/<part>.train.txt        (git-ignored, large)
  <val-out>/<part>.txt              (held-out slices: separate random streams / files / synsets)
"""
import argparse
import glob
import json
import os
import random
import re
import subprocess
import tarfile

import gen_code
import gen_heroes
import gen_stories

EOT = "<|endoftext|>"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORK = os.path.join(HERE, "work")

# ----------------------------------------------------------------------------- facts

def load_countries():
    npm_dir = os.path.join(WORK, "npm")
    pkg = os.path.join(npm_dir, "package")
    if not os.path.isdir(pkg):
        os.makedirs(npm_dir, exist_ok=True)
        subprocess.run(["npm", "pack", "countries-list@3.4.1"], cwd=npm_dir, check=True)
        tgz = sorted(glob.glob(os.path.join(npm_dir, "countries-list-*.tgz")))[-1]
        with tarfile.open(tgz) as t:
            t.extractall(npm_dir)
    lic = open(os.path.join(pkg, "LICENSE")).read()
    assert "MIT License" in lic, "countries-list licence is not MIT"
    countries = json.load(open(os.path.join(pkg, "countries.min.json")))
    continents = json.load(open(os.path.join(pkg, "continents.min.json")))
    languages = json.load(open(os.path.join(pkg, "languages.min.json")))
    out = []
    for code in sorted(countries):
        c = countries[code]
        langs = [languages[l]["name"] for l in c.get("languages", []) if l in languages]
        out.append(dict(code=code, name=c["name"], capital=c.get("capital", ""),
                        continent=continents[c["continent"]], languages=langs))
    return out


def join_list(xs):
    if len(xs) == 1:
        return xs[0]
    return ", ".join(xs[:-1]) + " and " + xs[-1]


def fact_sentences(rng, c):
    n, cap, cont, langs = c["name"], c["capital"], c["continent"], c["languages"]
    out = []
    if cap:
        out.append(rng.choice([
            f"The capital of {n} is {cap}.", f"The capital of {n} is {cap}.",
            f"The capital of {n} is {cap}.", f"The capital city of {n} is {cap}.",
            f"{cap} is the capital of {n}.", f"{n} has its capital in {cap}.",
            f"Q: What is the capital of {n}?\nA: The capital of {n} is {cap}.",
            f"The capital of {n} is {cap}. {cap} is a city in {cont}."]))
    out.append(rng.choice([f"{n} is a country in {cont}.", f"{n} is in {cont}.",
                           f"{n} is located in {cont}.", f"The country {n} is part of {cont}."]))
    if langs:
        ls = join_list(langs)
        if len(langs) == 1:
            out.append(rng.choice([f"People in {n} speak {ls}.", f"The language of {n} is {ls}.",
                                   f"In {n}, people speak {ls}."]))
        else:
            out.append(rng.choice([f"People in {n} speak {ls}.", f"The languages of {n} are {ls}.",
                                   f"In {n}, people speak {ls}."]))
    return out


def facts_doc(rng, countries):
    k = rng.randint(2, 6)
    doc = []
    for c in rng.sample(countries, k):
        sents = fact_sentences(rng, c)
        if rng.random() < 0.35:
            sents = sents[:1]  # capital-only line: the most asked fact
        else:
            rng.shuffle(sents[1:])
        doc.append(" ".join(sents))
    sep = rng.choice([" ", "\n"])
    return sep.join(doc)


# ----------------------------------------------------------------------------- code

CODE_VAL_FILES = ["bisect.py", "colorsys.py", "keyword.py", "shlex.py", "textwrap.py",
                  "fnmatch.py", "heapq.py"]


def code_docs():
    files = sorted(glob.glob("/usr/lib/python3.11/*.py"))
    train, val = [], []
    for f in files:
        try:
            txt = open(f, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        txt = txt.replace(EOT, "")
        if "\t" in txt[:20000] and txt.count("\t") > 50:
            continue  # odd tab-indented files add noise
        (val if os.path.basename(f) in CODE_VAL_FILES else train).append(txt)
    return train, val



# ----------------------------------------------------------------------------- english

WORDNET = "/usr/share/wordnet"
# A synset is dropped when its gloss flags the word (offensive, slang, ...) or its lemmas, gloss or
# examples touch sex, sexual violence, slurs, suicide, torture or murder: a classroom tool's model
# should not learn them. Sentences containing any lemma of a dropped synset are dropped too.
FLAGS = ("offensive", "obscene", "vulgar", "derogatory", "disparaging", "slang", "ethnic slur", "racist",
         "insulting", "informal term")
BLOCK = re.compile(r"\b(sex\w*|rap(e|ed|es|ing|ist)|bitch\w*|bastard\w*|whor\w*|slut\w*|penis\w*|vagin\w*|"
                   r"genital\w*|copulat\w*|intercourse|orgasm\w*|erotic\w*|porn\w*|prostitut\w*|masturbat\w*|"
                   r"semen|ejaculat\w*|nude|naked|suicid\w*|tortur\w*|murder\w*|homicid\w*|slaughter\w*|"
                   r"nigg\w*|fag\w*|retard\w*|damn\w*|hell|drunk\w*|breast\w*|buttock\w*|anus|anal)\b")


def wordnet_docs(rng_train, rng_val, val_every=40):
    """Per synset that has example sentences: a definition sentence plus its examples.
    Synsets whose byte offset / 8 is divisible by val_every are held out for validation."""
    lic = open("/usr/share/doc/wordnet-base/copyright", encoding="utf-8").read()
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in lic, "wordnet-base licence not found"
    items, banned = [], set()
    for pos in ["noun", "verb", "adj", "adv"]:
        for line in open(os.path.join(WORDNET, f"data.{pos}"), encoding="latin-1"):
            if line.startswith("  ") or " | " not in line:
                continue
            head, gloss = line.rstrip().split(" | ", 1)
            f = head.split()
            n = int(f[3], 16)
            lemmas = [f[4 + 2 * k].replace("_", " ") for k in range(n)]
            lemmas = [l.split("(")[0] for l in lemmas]
            if any(w in gloss.lower() for w in FLAGS) or BLOCK.search((" ".join(lemmas) + " " + gloss).lower()):
                banned.update(l.lower() for l in lemmas)
                continue
            parts = [p.strip() for p in gloss.split(";")]
            defs = [p for p in parts if not p.startswith('"')]
            exs = [p.strip('"').strip() for p in parts if p.startswith('"') and p.endswith('"') and len(p) > 12]
            if not exs or not defs:
                continue
            items.append((int(f[0]), pos, lemmas[0], defs[0], exs))
    import regex
    word = regex.compile(r"\p{L}+")

    def clean(items_):
        out = []
        for off, pos, lemma, d, exs in items_:
            exs = [e for e in exs if not (set(w.lower() for w in word.findall(e)) & banned)]
            if not exs or lemma.lower() in banned:
                continue
            out.append((off, pos, lemma, d, exs))
        return out

    items = clean(items)

    def sentence(e):
        e = e[0].upper() + e[1:]
        return e if e[-1] in ".!?" else e + "."

    def render(rng, it):
        off, pos, lemma, d, exs = it
        if pos == "noun":
            art = "" if d.startswith(("a ", "an ", "the ")) else ""
            dd = f"{gen_stories.a_an(lemma).capitalize()} is {art}{d}." if rng.random() < 0.6 else f"{lemma.capitalize()}: {d}."
        elif pos == "verb":
            dd = f"To {lemma} is to {d}." if rng.random() < 0.6 else f"{lemma.capitalize()} means to {d}."
        else:
            dd = f"{lemma.capitalize()} means {d}."
        ex = [sentence(e) for e in exs]
        r = rng.random()
        if r < 0.35:
            return " ".join(ex)
        if r < 0.7:
            return dd + " " + " ".join(ex)
        return dd + " For example: " + " ".join(f"\"{e}\"" for e in ex)

    def docs(rng, its, repeats):
        its = its * repeats
        rng.shuffle(its)
        out, k = [], 0
        while k < len(its):
            n = rng.randint(3, 9)
            sep = rng.choice([" ", "\n"])
            out.append(sep.join(render(rng, it) for it in its[k:k + n]))
            k += n
        return out

    tr = [it for it in items if (it[0] // 8) % val_every != 0]
    va = [it for it in items if (it[0] // 8) % val_every == 0]
    return docs(rng_train, tr, 2), docs(rng_val, va, 1)


# ----------------------------------------------------------------------------- main

def write_docs(path, docs):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(EOT.join(docs))


def write_names(a, rng, gen):
    names = gen(rng, lambda r: gen_stories.story(r, spelled=True), a.names_mb * 1e6)
    write_docs(os.path.join(a.out, "names.train.txt"), names)
    print(f"names: train {len(names)} docs {sum(map(len, names))/1e6:.2f} MB")


def identifier_words():
    """WordNet noun, verb and adjective lemmas usable as Python identifiers (3-10 lowercase letters) that
    occur in WordNet's tagged corpus (tagsense_cnt > 0: everyday words, not "sainfoin")."""
    import keyword
    words = set()
    for pos in ("noun", "verb", "adj"):
        for line in open(os.path.join(WORDNET, f"index.{pos}"), encoding="utf-8"):
            f = line.split()
            if line.startswith(" ") or len(f) < 6:
                continue
            w, p_cnt = f[0], int(f[3])
            if int(f[5 + p_cnt]) > 0 and w.isalpha() and w.islower() and 3 <= len(w) <= 10 and \
                    w.isascii() and not keyword.iskeyword(w):
                words.add(w)
    return sorted(words)


def write_coderecall(a, rng, gen):
    words = identifier_words()
    docs = gen(rng, lambda r: gen_code.module(r, words), a.coderecall_mb * 1e6)
    write_docs(os.path.join(a.out, "coderecall.train.txt"), docs)
    print(f"coderecall: train {len(docs)} docs {sum(map(len, docs))/1e6:.2f} MB ({len(words)} words)")


def write_named_stories(a, rng, gen, part, story, mb):
    """A training-only story part that never invents one of the held-out prompts' names."""
    with open(os.path.join(HERE, "heldout", "prompts.json"), encoding="utf-8") as f:
        exclude = {p["name"] for p in json.load(f)["names"]}
    docs = gen(rng, lambda r: story(r, exclude), mb * 1e6)
    write_docs(os.path.join(a.out, f"{part}.train.txt"), docs)
    print(f"{part}: train {len(docs)} docs {sum(map(len, docs))/1e6:.2f} MB")


def write_recall(a, rng, gen):
    write_named_stories(a, rng, gen, "recall", gen_stories.recall_story, a.recall_mb)


def write_heroes(a, rng, gen):
    write_named_stories(a, rng, gen, "heroes", gen_heroes.hero_story, a.heroes_mb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--stories-mb", type=float, default=30.0)
    ap.add_argument("--code-mb", type=float, default=14.0)
    ap.add_argument("--facts-mb", type=float, default=6.0)
    ap.add_argument("--names-mb", type=float, default=6.0)
    ap.add_argument("--recall-mb", type=float, default=6.0)
    ap.add_argument("--only-names", action="store_true", help="write only the names part (the others exist)")
    ap.add_argument("--coderecall-mb", type=float, default=6.0)
    ap.add_argument("--only-recall", action="store_true", help="write only the recall part (the others exist)")
    ap.add_argument("--only-coderecall", action="store_true", help="write only the coderecall part")
    ap.add_argument("--heroes-mb", type=float, default=6.0)
    ap.add_argument("--only-heroes", action="store_true", help="write only the heroes part")
    ap.add_argument("--val-kb", type=float, default=40.0)
    ap.add_argument("--out", default=os.path.join(WORK, "data"))
    ap.add_argument("--val-out", default=os.path.join(HERE, "val"))
    a = ap.parse_args()

    # separate RNG streams so each part is independent of the other parts' sizes
    rs, rsv = random.Random(a.seed * 10 + 1), random.Random(a.seed * 10 + 2)
    rf, rfv = random.Random(a.seed * 10 + 3), random.Random(a.seed * 10 + 4)
    rc, rcv = random.Random(a.seed * 10 + 5), random.Random(a.seed * 10 + 6)
    re_, rev = random.Random(a.seed * 10 + 7), random.Random(a.seed * 10 + 8)
    rn, rr = random.Random(a.seed * 10 + 9), random.Random(a.seed * 10 + 10)
    rcr, rh = random.Random(a.seed * 10 + 11), random.Random(a.seed * 10 + 12)

    def gen(rng, fn, nbytes):
        docs, n = [], 0
        while n < nbytes:
            d = fn(rng)
            docs.append(d)
            n += len(d) + len(EOT)
        return docs

    if a.only_names:
        return write_names(a, rn, gen)
    if a.only_recall:
        return write_recall(a, rr, gen)
    if a.only_coderecall:
        return write_coderecall(a, rcr, gen)
    if a.only_heroes:
        return write_heroes(a, rh, gen)
    countries = load_countries()
    ff = lambda r: facts_doc(r, countries)
    std_train, std_val = code_docs()
    en_train, en_val = wordnet_docs(re_, rev)
    parts = [("stories", gen(rs, gen_stories.story, a.stories_mb * 1e6), gen(rsv, gen_stories.story, a.val_kb * 1e3)),
             ("facts", gen(rf, ff, a.facts_mb * 1e6), gen(rfv, ff, a.val_kb * 1e3)),
             ("code", gen(rc, gen_code.module, a.code_mb * 1e6), gen(rcv, gen_code.module, a.val_kb * 1e3)),
             ("stdlib", std_train, std_val),
             ("english", en_train, en_val[:len(en_val) * 1 // 1])]
    for name, tr, va in parts:
        write_docs(os.path.join(a.out, f"{name}.train.txt"), tr)
        write_docs(os.path.join(a.val_out, f"{name}.txt"), va)
        print(f"{name}: train {len(tr)} docs {sum(map(len, tr))/1e6:.2f} MB, "
              f"val {len(va)} docs {sum(map(len, va))/1e3:.1f} KB")
    write_names(a, rn, gen)
    write_recall(a, rr, gen)
    write_coderecall(a, rcr, gen)
    write_heroes(a, rh, gen)
    with open(os.path.join(a.out, "countries.json"), "w") as f:
        json.dump(countries, f, indent=0)


if __name__ == "__main__":
    main()
