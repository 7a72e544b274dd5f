"""Hero stories for the training mix: the recall stories of gen_stories.py, introduced in more of the ways people
start a story (deterministic from an RNG, project-authored).

A teacher's prompt rarely reads "Once upon a time, there was a cat named X.": it starts with the name ("X was
the fastest runner in town."), gives a title ("The new doctor's name was Dr. X."), a pet ("My dog is called X."),
an apposition ("Everyone knew the baker, X.") or a companion ("X and her brother went to the lake."). The names
come from three generators with equal weight: spelled from letters, made of syllables (gen_stories), and the
longer flowing names of this module (two or three syllables, doubled consonants, story-book endings), so that
the only safe guess for a name's next mention is an exact copy of its first one.
"""
import gen_stories as gs
from gen_stories import a_an, at

VOWELS = "a e i o u a e i o".split()
MIDDLE_CODAS = ["", "", "", "", "l", "n", "r", "m", "ll", "nn", "rr", "ss", "bb", "ff", "tt"]
SIMPLE_ONSETS = "b d f g k l m n p r s t v z th sh".split()
FINAL_CODAS = ["", "", "n", "r", "l", "x", "k", "s", "th", "ns", "ck", "nt"]
LONG_ENDINGS = {"f": ["essa", "onia", "ine", "anni", "elle", "ova", "ana", "eth", "ira", "ette", "ia", "a"],
                "m": ["ins", "el", "ith", "or", "ek", "ock", "ax", "us", "ander", "ic", "on", "o"]}
ROLES = ["baker", "teacher", "farmer", "doctor", "captain", "mayor", "painter", "fisherman", "librarian",
         "gardener", "cook", "shopkeeper", "postman", "nurse", "tailor", "clockmaker", "sailor", "miller"]
PETS = ["cat", "dog", "puppy", "kitten", "rabbit", "hamster", "parrot", "horse", "goat", "turtle", "goldfish",
        "pony", "mouse", "duck", "lizard", "hedgehog"]
OWNERS = ["king", "queen", "farmer", "old man", "old woman", "wizard", "witch", "princess", "prince", "giant"]
TITLES = {"f": ["Mrs.", "Miss", "Ms.", "Doctor", "Captain", "Princess", "Queen", "Aunt", "Granny"],
          "m": ["Mr.", "Doctor", "Captain", "Prince", "King", "Uncle", "Sir", "Grandpa"]}
BEST = ["fastest", "smallest", "tallest", "bravest", "kindest", "loudest", "cleverest", "happiest", "oldest",
        "youngest", "strongest", "busiest"]
DOING = ["looked out of the window and saw {w}", "woke up to the sound of {w}", "ran all the way to the {p}",
         "found {a} under the bed", "had {a} and a big dream", "could not find {mine}", "wanted to see the {p}",
         "sat by the {p} and waited", "made a wish on a falling star", "was late for school again",
         "lost {mine} on the way to the {p}", "heard a strange noise in the {p}"]
SIGHTS = ["snow", "rain", "a rainbow", "birds", "the sea", "a big ship", "the moon", "falling leaves", "thunder"]


def long_name(rng, sex):
    """Two or three syllables, sometimes a doubled consonant, often a story-book ending (Pellonia-like)."""
    n = rng.choice([2, 2, 3])
    s = rng.choice(gs.ONSETS)
    for i in range(n):
        s += rng.choice(VOWELS)
        coda = rng.choice(MIDDLE_CODAS if i < n - 1 else FINAL_CODAS)
        s += coda
        if i < n - 1 and len(coda) < 2:
            s += rng.choice(SIMPLE_ONSETS)
    if rng.random() < 0.6:
        s = s.rstrip("aeiou") + rng.choice(LONG_ENDINGS[sex])
    return s[:11].capitalize()


def any_name(rng, sex):
    r = rng.random()
    if r < 1 / 3:
        return gs.spelled_name(rng, sex)
    return gs.new_name(rng, sex) if r < 2 / 3 else long_name(rng, sex)


def fill(rng, text, h, c):
    return text.format(w=rng.choice(SIGHTS), p=c["place"], a=a_an(c["obj"]), mine=f"{h.his} {c['obj']}")


def intro(rng, h, place, c):
    """The first sentence: the hero's name given in one of many shapes. May give the hero a title, which then
    stays with the name for the whole story."""
    H, k = h.name, rng.randrange(12)
    if k == 0:
        title = rng.choice(TITLES[h.sex])
        h.name = f"{title} {H}"
        role = rng.choice(ROLES)
        return rng.choice([f"The new {role}'s name was {h.name}.", f"Our {role} was called {h.name}.",
                           f"Everyone liked the {role}, {h.name}.", f"{h.name} was the {role} {at(place)}."])
    if k == 1:
        h.kind = rng.choice(PETS)
        return rng.choice([f"My {h.kind} is called {H}.", f"My {h.kind}'s name is {H}.",
                           f"We have {a_an(h.kind)} named {H}.", f"I have {a_an(h.kind)}. {h.His} name is {H}."])
    if k == 2:
        return f"The {rng.choice(OWNERS)} had {a_an(rng.choice(PETS))} called {H}."
    if k == 3:
        return rng.choice([f"Everyone {at(place)} knew the {rng.choice(ROLES)}, {H}.",
                           f"The {rng.choice(ROLES)} {at(place)}, {H}, was very {h.trait}."])
    if k == 4:
        kin = rng.choice(["sister", "brother", "mom", "dad", "grandma", "best friend", "cousin"])
        return f"{H} and {h.his} {kin} went to the {place}."
    if k == 5:
        return f"{H} was the {rng.choice(BEST)} {h.kind} {at(place)}."
    if k == 6:
        return f"{H} {fill(rng, rng.choice(DOING), h, c)}."
    if k == 7:
        return f"{H} was {a_an(h.trait)} {h.kind} with {a_an(c['obj'])}."
    if k == 8:
        return f"{rng.choice(gs.TIMES)}, {a_an(h.kind)} named {H} {fill(rng, rng.choice(DOING), h, c)}."
    if k == 9:
        return f"The {rng.choice(['ship', 'castle', 'farm', 'circus', 'school', 'shop'])}'s " \
               f"{rng.choice(ROLES)} was {a_an(h.kind)} named {H}."
    return gs.opening(rng, h, place)


def hero_story(rng, exclude=()):
    """A recall story (gen_stories.recall_story) opened by `intro`. `exclude`: names never to invent."""
    gs._name_source[0] = any_name
    try:
        return gs._story(rng, set(exclude), recall=True, first_line=intro)
    finally:
        gs._name_source[0] = gs.new_name
