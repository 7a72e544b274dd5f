#!/usr/bin/python3
"""Build the kvscope-tiny training corpus, deterministically from a seed.

Three parts, each written as documents separated by the literal "<|endoftext|>":
  stories : project-authored generator of simple children's stories (this file).
            Names and objects introduced early recur later, so the model must copy
            them from context (this is what grows induction/copy heads).
  facts   : country / capital / continent / language sentences from the MIT-licensed
            npm package `countries-list` (fetched with `npm pack` into work/npm).
  code    : Python standard library sources shipped by Debian (/usr/lib/python3.11/*.py, PSF).

Outputs:
  work/data/{stories,facts,code}.train.txt       (git-ignored, large)
  assets/models/kvscope-tiny/val/{stories,facts,code}.txt   (held-out, shipped, small)
"""
import argparse
import glob
import json
import os
import random
import subprocess
import tarfile

EOT = "<|endoftext|>"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORK = os.path.join(HERE, "work")

# ----------------------------------------------------------------------------- stories

GIRLS = """Lily Emma Mia Sophie Anna Lucy Grace Chloe Ella Zoe Amy Ruby Rosa Maya Nora Ivy Hannah
Sara Julia Clara Alice Molly Daisy Eva Leah Nina Olivia Paula Tess Wendy Kate Jenny Lola Iris Hazel
Fiona Greta Heidi Isla Jade Kira Luna Mila Nell Penny Quinn Rita Stella Tina Una Vera Willa Yara Lena
Abby Bella Cora Dora Elsa Fay Gina Holly Ingrid Joy Kim Lara Mona Nadia Opal Pia Rae Sky Tara Uma""".split()
BOYS = """Tom Max Ben Sam Leo Jack Finn Noah Liam Oscar Theo Ollie Jake Timmy Bob Tim Luke Adam
Eli Felix Gus Henry Ivan Joe Kai Lars Milo Ned Owen Pete Ray Seth Toby Vince Will Zack Alex Billy
Carl Dan Ethan Fred George Hugo Igor Jonah Kevin Louis Mark Nick Otto Paul Rory Simon Ted Victor
Walt Yuri Arlo Bruno Colin Dylan Evan Frank Harry Jim Karl Lenny Mike Nate Omar Rex Sid Troy""".split()

HUMAN_KINDS = {"f": ["girl", "little girl", "young girl"], "m": ["boy", "little boy", "young boy"]}
ANIMAL_KINDS = ["cat", "dog", "bunny", "bear", "fox", "duck", "mouse", "puppy", "kitten", "frog",
                "bird", "pig", "lamb", "owl", "squirrel", "turtle", "horse", "deer"]
TRAITS = ["kind", "brave", "curious", "happy", "shy", "clever", "funny", "gentle", "busy", "quiet",
          "cheerful", "silly", "friendly", "careful", "playful", "bright"]
PLACES = [("park", "in the park"), ("forest", "in the forest"), ("beach", "at the beach"),
          ("garden", "in the garden"), ("farm", "on the farm"), ("lake", "by the lake"),
          ("hill", "on the hill"), ("town", "in the town"), ("school", "at school"),
          ("library", "at the library"), ("zoo", "at the zoo"), ("river", "by the river"),
          ("meadow", "in the meadow"), ("yard", "in the yard"), ("market", "at the market"),
          ("playground", "at the playground"), ("woods", "in the woods"), ("pond", "by the pond"),
          ("village", "in the village"), ("kitchen", "in the kitchen")]
COLORS = ["red", "blue", "green", "yellow", "pink", "purple", "orange", "white", "black", "brown",
          "shiny", "big", "little", "old", "new", "soft", "tiny", "golden", "silver", "striped"]
OBJECTS = ["ball", "kite", "hat", "book", "box", "boat", "car", "doll", "drum", "cup", "key", "bike",
           "shoe", "sock", "spoon", "balloon", "bucket", "rope", "shell", "stone", "flower", "leaf",
           "teddy bear", "train", "truck", "whistle", "map", "lamp", "bell", "ring", "scarf", "basket",
           "blanket", "crayon", "robot", "puzzle", "jar", "feather", "coin", "umbrella"]
FOODS = ["apples", "cookies", "cake", "bread", "carrots", "berries", "soup", "pie", "honey",
         "cheese", "grapes", "pancakes", "nuts", "muffins", "oranges", "candy"]
WEATHER = ["The sun was shining.", "The sky was blue and clear.", "It was a warm day.",
           "A cool wind was blowing.", "The clouds were white and fluffy.", "It was a bright morning.",
           "Birds were singing in the trees.", "The grass was wet with rain.", "It was a sunny day.",
           "The air smelled of flowers.", "Leaves fell from the trees.", "Snow covered the ground."]
FEELINGS_GOOD = ["happy", "glad", "proud", "excited", "joyful", "thankful"]
FEELINGS_BAD = ["sad", "worried", "scared", "upset", "lonely", "angry"]
ACTIVITIES = ["play tag", "build a sandcastle", "draw pictures", "sing songs", "play hide and seek",
              "look for bugs", "pick flowers", "fly a kite", "jump in puddles", "read a story",
              "bake a cake", "ride bikes", "play ball", "count the stars", "make a fort"]
MORALS = ["Sharing makes everyone happy.", "It is good to help your friends.",
          "Being kind is the best thing you can do.", "Friends make everything better.",
          "It is okay to ask for help.", "Trying again is how you learn.",
          "Being brave means doing it even when you are scared.", "Saying sorry can fix a lot."]
ENDINGS = ["From that day on, {H} and {F} were best friends.", "{H} smiled all the way home.",
           "That night, {H} went to sleep with a big smile.", "{H} never forgot that day.",
           "And {H} lived happily ever after.", "It was the best day ever for {H}.",
           "{H} and {F} played together until the sun went down.",
           "{H} hugged {F} and said, \"Thank you.\""]


class Char:
    def __init__(self, rng, used, animal_ok=True):
        self.sex = rng.choice("fm")
        pool = GIRLS if self.sex == "f" else BOYS
        name = rng.choice(pool)
        while name in used:
            name = rng.choice(pool)
        used.add(name)
        self.name = name
        if animal_ok and rng.random() < 0.3:
            self.kind = rng.choice(ANIMAL_KINDS)
            if rng.random() < 0.5:
                self.kind = "little " + self.kind
        else:
            self.kind = rng.choice(HUMAN_KINDS[self.sex])
        self.trait = rng.choice(TRAITS)
        f = self.sex == "f"
        self.he, self.him, self.his = ("she", "her", "her") if f else ("he", "him", "his")
        self.He, self.His = self.he.capitalize(), self.his.capitalize()
        self.parent = rng.choice(["mom", "dad", "grandma", "grandpa"])


def a_an(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def story(rng):
    used = set()
    h = Char(rng, used)
    fr = Char(rng, used)
    place, at_place = rng.choice(PLACES)
    obj = rng.choice(COLORS) + " " + rng.choice(OBJECTS)
    food = rng.choice(FOODS)
    act = rng.choice(ACTIVITIES)
    H, F = h.name, fr.name
    s = []
    # -- opening
    o = rng.random()
    if o < 0.5:
        s.append(f"Once upon a time, there was {a_an(h.trait)} {h.kind} named {H}.")
    elif o < 0.65:
        s.append(f"Once upon a time, {a_an(h.kind)} named {H} lived near {a_an(place)}.")
    elif o < 0.8:
        s.append(f"There once was {a_an(h.trait)} {h.kind} called {H}.")
    elif o < 0.9:
        s.append(f"One day, {a_an(h.kind)} named {H} went to the {place}.")
    else:
        s.append(f"{H} was {a_an(h.trait)} {h.kind}.")
    if rng.random() < 0.7:
        s.append(rng.choice([
            f"{h.He} loved to {act}.", f"{h.He} liked to play {at_place}.",
            f"{h.He} had {a_an(obj)}.", f"Every day, {H} went to the {place}.",
            f"{H} lived with {h.his} {h.parent} in a small house.",
            f"{h.He} was very {h.trait} and loved {food}."]))
    if rng.random() < 0.5:
        s.append(rng.choice(WEATHER))
    plot = rng.randrange(8)
    if plot == 0:  # lost object, friend helps find it
        s.append(f"{H} had {a_an(obj)} that {h.he} loved very much.")
        s.append(f"One day, {H} took the {obj} to the {place}.")
        s.append(rng.choice([f"But when {h.he} looked down, the {obj} was gone!",
                             f"{h.He} played and played, and then {h.he} could not find the {obj}."]))
        s.append(f"{H} felt {rng.choice(FEELINGS_BAD)}. \"Where is my {obj}?\" {h.he} cried.")
        s.append(f"Just then, {F} the {fr.kind} came by. \"What is wrong, {H}?\" asked {F}.")
        s.append(f"\"I lost my {obj},\" said {H}.")
        s.append(f"\"I will help you look for it,\" said {F}.")
        s.append(rng.choice([f"{H} and {F} looked under the trees and behind the rocks.",
                             f"They looked everywhere {at_place}.",
                             f"{F} looked high and {H} looked low."]))
        s.append(f"At last, {F} found the {obj} {rng.choice(['under a bush', 'near the water', 'in the grass', 'behind a big rock', 'next to a tree'])}.")
        s.append(f"\"Here it is!\" said {F}. {H} was so {rng.choice(FEELINGS_GOOD)}.")
        s.append(f"\"Thank you, {F}!\" said {H}.")
    elif plot == 1:  # sharing
        s.append(f"{H} had a bag of {food}.")
        s.append(f"{h.He} went to the {place} and saw {F}, {a_an(fr.trait)} {fr.kind}.")
        s.append(f"{F} looked {rng.choice(FEELINGS_BAD)}. {fr.He} had no {food}.")
        s.append(f"{H} thought for a moment. Then {h.he} said, \"{F}, do you want some {food}?\"")
        s.append(f"{F} smiled. \"Yes, please!\" {fr.he} said.")
        s.append(f"{H} gave {F} half of the {food}.")
        s.append(rng.choice([f"The {food} tasted even better when {H} and {F} ate them together.",
                             f"{H} and {F} sat {at_place} and ate the {food}.",
                             f"{F} said, \"You are a good friend, {H}.\""]))
        s.append(f"After that, {F} shared {fr.his} {obj} with {H}.")
    elif plot == 2:  # stuck in a tree
        s.append(f"{H} and {F} were playing with {a_an(obj)} {at_place}.")
        s.append(f"{F} threw the {obj} very high, and it got stuck in a tall tree.")
        s.append(f"\"Oh no!\" said {H}. \"The {obj} is stuck!\"")
        s.append(f"{F} tried to jump, but {fr.he} could not reach it.")
        s.append(f"{H} tried to climb the tree, but it was too tall.")
        s.append(rng.choice([f"Then {H} had an idea. {h.He} asked {h.his} {h.parent} for help.",
                             f"Then a big bird flew down and pushed the {obj} with its wing.",
                             f"Then {H} found a long stick and poked the {obj}."]))
        s.append(f"The {obj} fell down, and {F} caught it.")
        s.append(f"\"We did it!\" said {H} and {F}.")
    elif plot == 3:  # fear overcome
        thing = rng.choice(["the dark", "the big dog next door", "the tall slide", "the deep water",
                            "the loud thunder", "the old bridge"])
        s.append(f"{H} was scared of {thing}.")
        s.append(f"One day, {F} asked {H} to come to the {place}.")
        s.append(f"\"I can't,\" said {H}. \"I am scared of {thing}.\"")
        s.append(f"{F} held {H}'s hand. \"I will stay with you,\" said {F}.")
        s.append(f"{H} took a deep breath. {h.He} was brave and went with {F}.")
        s.append(rng.choice([f"It was not so bad after all. {H} even laughed.",
                             f"Soon {H} was not scared anymore.",
                             f"{H} found out that {thing} was not scary at all."]))
        s.append(f"\"You were so brave, {H}!\" said {F}.")
    elif plot == 4:  # broken object, fix together
        s.append(f"{F} had {a_an(obj)}. {fr.He} loved it very much.")
        s.append(f"One day, {H} wanted to play with the {obj}.")
        s.append(f"\"Can I play with your {obj}?\" asked {H}.")
        s.append(f"\"Yes, but be careful,\" said {F}.")
        s.append(f"{H} played with the {obj}, but it fell and broke.")
        s.append(f"{F} was {rng.choice(FEELINGS_BAD)}. {H} felt bad too.")
        s.append(f"\"I am sorry, {F},\" said {H}. \"I will help you fix it.\"")
        s.append(rng.choice([f"{H} and {F} fixed the {obj} with some glue.",
                             f"{H}'s {h.parent} helped them fix the {obj}.",
                             f"They worked together all afternoon to fix the {obj}."]))
        s.append(f"Soon the {obj} was as good as new. {F} smiled at {H}.")
    elif plot == 5:  # surprise / gift
        s.append(f"It was {F}'s birthday.")
        s.append(f"{H} wanted to give {F} a special gift.")
        s.append(f"{h.He} went to the {place} to look for something nice.")
        s.append(f"There {h.he} found {a_an(obj)}.")
        s.append(f"\"{F} will love this {obj},\" thought {H}.")
        s.append(f"{H} wrapped the {obj} in paper and gave it to {F}.")
        s.append(f"{F} opened the gift and saw the {obj}.")
        s.append(f"\"Wow, {a_an(obj)}! Thank you, {H}!\" said {F}.")
    elif plot == 6:  # learning something
        skill = rng.choice(["ride a bike", "swim", "read", "whistle", "tie {his} shoes", "climb a tree",
                            "bake bread", "skip a stone", "jump rope", "paint a picture"]).format(his=h.his)
        s.append(f"{H} wanted to learn how to {skill}.")
        s.append(f"{h.He} tried, but it was very hard.")
        s.append(f"{H} felt {rng.choice(FEELINGS_BAD)}. \"I will never learn to {skill},\" {h.he} said.")
        s.append(f"{F} saw {H} and said, \"Do not give up, {H}. Try again!\"")
        s.append(f"{H} tried again and again.")
        s.append(f"At last, {H} could {skill}!")
        s.append(f"\"Look, {F}! I did it!\" said {H}. {F} clapped {fr.his} hands.")
    else:  # adventure / discovery
        s.append(f"{H} and {F} went for a walk to the {place}.")
        s.append(f"On the way, they found {a_an(obj)} on the ground.")
        s.append(f"\"Whose {obj} is this?\" asked {F}.")
        s.append(f"\"I don't know,\" said {H}. \"Let's find out.\"")
        owner = Char(rng, used, animal_ok=True)
        s.append(f"They walked and walked until they met {a_an(owner.kind)} named {owner.name}.")
        s.append(f"{owner.name} was crying. \"I lost my {obj},\" said {owner.name}.")
        s.append(f"{H} gave the {obj} back to {owner.name}.")
        s.append(f"{owner.name} was very {rng.choice(FEELINGS_GOOD)}. \"Thank you, {H} and {F}!\" said {owner.name}.")
    # -- ending
    if rng.random() < 0.8:
        s.append(rng.choice(ENDINGS).format(H=H, F=F))
    if rng.random() < 0.3:
        s.append(rng.choice(MORALS))
    # paragraphs: split into 1-3 paragraphs
    text = " ".join(s)
    if rng.random() < 0.5 and len(s) > 6:
        k = rng.randrange(3, len(s) - 2)
        text = " ".join(s[:k]) + "\n\n" + " ".join(s[k:])
    return text


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


# ----------------------------------------------------------------------------- main

def write_docs(path, docs):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(EOT.join(docs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--stories-mb", type=float, default=30.0)
    ap.add_argument("--facts-mb", type=float, default=6.0)
    ap.add_argument("--val-kb", type=float, default=60.0)
    ap.add_argument("--out", default=os.path.join(WORK, "data"))
    ap.add_argument("--val-out", default=os.path.join(ROOT, "assets", "models", "kvscope-tiny", "val"))
    a = ap.parse_args()

    # separate RNG streams so each part is independent of the other parts' sizes
    rs, rsv = random.Random(a.seed * 10 + 1), random.Random(a.seed * 10 + 2)
    rf, rfv = random.Random(a.seed * 10 + 3), random.Random(a.seed * 10 + 4)

    def gen(rng, fn, nbytes):
        docs, n = [], 0
        while n < nbytes:
            d = fn(rng)
            docs.append(d)
            n += len(d) + len(EOT)
        return docs

    st_train = gen(rs, story, a.stories_mb * 1e6)
    st_val = gen(rsv, story, a.val_kb * 1e3)
    countries = load_countries()
    ff = lambda r: facts_doc(r, countries)
    fa_train = gen(rf, ff, a.facts_mb * 1e6)
    fa_val = gen(rfv, ff, a.val_kb * 1e3)
    co_train, co_val = code_docs()

    for name, tr, va in [("stories", st_train, st_val), ("facts", fa_train, fa_val), ("code", co_train, co_val)]:
        write_docs(os.path.join(a.out, f"{name}.train.txt"), tr)
        write_docs(os.path.join(a.val_out, f"{name}.txt"), va)
        print(f"{name}: train {len(tr)} docs {sum(map(len, tr))/1e6:.2f} MB, "
              f"val {len(va)} docs {sum(map(len, va))/1e3:.1f} KB")
    with open(os.path.join(a.out, "countries.json"), "w") as f:
        json.dump(countries, f, indent=0)


if __name__ == "__main__":
    main()
