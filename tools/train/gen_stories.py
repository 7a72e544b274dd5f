"""Children's stories for the training mix (project-authored generator, deterministic from an RNG).

Names come mostly from an open-ended syllable generator, so almost every name occurs in exactly
one story: the only way to predict a name's second mention is to copy its first one (what makes
a copy/induction head form). Plots, dialogue, feelings, places and sentence shapes vary widely so
ordinary hand-written children's prose is predictable, not only this generator's templates.
"""
import re

# ----------------------------------------------------------------------------- names

ONSETS = ("b c d f g h j k l m n p r s t v w z br bl cl cr dr fl fr gl gr kl pl pr sh sk sl sn sp st "
          "th tr ch wh zh qu y").split()
VOWELS = "a e i o u a e i o ee oo ai ay ia io ou y".split()
CODAS = ("", "", "", "", "n", "r", "l", "m", "x", "s", "th", "nd", "rk", "lb", "sh", "ck", "rt", "nt", "z")
ENDINGS_F = ["a", "ia", "elle", "ina", "ette", "ara", "y", "ie", "wen", "ra"]
ENDINGS_M = ["o", "us", "an", "ix", "er", "on", "in", "ax", "ard", "ek"]
COMMON_F = """Lily Emma Mia Sophie Anna Lucy Grace Chloe Ella Zoe Amy Ruby Rosa Maya Nora Ivy Hannah Sara
Julia Clara Alice Molly Daisy Eva Leah Nina Olivia Kate Jenny Luna Mila Stella Priya Aisha Mei Sofia""".split()
COMMON_M = """Tom Max Ben Sam Leo Jack Finn Noah Liam Oscar Theo Jake Tim Luke Adam Eli Felix Henry Ivan
Joe Kai Milo Owen Pete Ray Toby Alex Dan Ethan Fred Hugo Omar Ravi Kenji Mateo Diego""".split()


def syllable(rng, last):
    coda = rng.choice(CODAS) if last else (rng.choice("nrlms") if rng.random() < 0.3 else "")
    return rng.choice(ONSETS) + rng.choice(VOWELS) + coda


def new_name(rng, sex):
    """An open-ended invented name (most are unique to one story); sometimes a common one."""
    if rng.random() < 0.12:
        return rng.choice(COMMON_F if sex == "f" else COMMON_M)
    n = rng.choice([1, 2, 2, 2])
    s = "".join(syllable(rng, i == n - 1) for i in range(n))
    if rng.random() < (0.8 if n == 1 else 0.35):
        s += rng.choice(ENDINGS_F if sex == "f" else ENDINGS_M)
    s = s[:9]
    return s.capitalize()


CONSONANTS, VOWEL_LETTERS = "bcdfghjklmnpqrstvwxz", "aeiouy"


def spelled_name(rng, sex):
    """A name spelled from random letters (4-9, consonant and vowel runs alternating): unlike the syllable
    names, its BPE pieces follow no pattern the model could learn, so a later mention can only be copied."""
    n, s, cons = rng.randint(4, 9), "", rng.random() < 0.6
    while len(s) < n:
        s += rng.choice(CONSONANTS) if cons else rng.choice(VOWEL_LETTERS)
        if rng.random() < 0.25:
            s += rng.choice(CONSONANTS) if cons else rng.choice(VOWEL_LETTERS)
        cons = not cons
    return s[:n].capitalize()


_name_source = [new_name]  # story(spelled=True) swaps in spelled_name for every name it invents


def invent_name(rng, sex):
    return _name_source[0](rng, sex)


# ----------------------------------------------------------------------------- word lists

HUMAN = {"f": ["girl", "little girl", "young girl", "princess", "farmer", "queen", "witch", "fairy"],
         "m": ["boy", "little boy", "young boy", "prince", "farmer", "king", "wizard", "knight"]}
CREATURES = ["cat", "dog", "bunny", "bear", "fox", "duck", "mouse", "puppy", "kitten", "frog", "bird", "pig",
             "owl", "squirrel", "turtle", "horse", "deer", "dragon", "robot", "unicorn", "giant", "troll",
             "monster", "penguin", "lion", "tiger", "elephant", "hedgehog", "snail", "whale", "goat", "crab",
             "spider", "bee", "butterfly", "dinosaur", "goblin", "ghost", "snowman", "octopus"]
TRAITS = ["kind", "brave", "curious", "happy", "shy", "clever", "funny", "gentle", "busy", "quiet", "cheerful",
          "silly", "friendly", "careful", "playful", "bright", "grumpy", "lazy", "sleepy", "proud", "tiny",
          "clumsy", "wise", "noisy", "lonely", "bold", "small", "old", "young", "hungry"]
PLACES = ["park", "forest", "beach", "garden", "farm", "lake", "hill", "town", "school", "library", "zoo",
          "river", "meadow", "yard", "market", "playground", "woods", "pond", "village", "kitchen", "castle",
          "cave", "mountain", "island", "desert", "city", "bakery", "museum", "jungle", "harbor", "barn",
          "swamp", "valley", "tower", "attic", "station", "circus", "field", "orchard", "bridge"]
PREP = {"beach": "at", "school": "at", "library": "at", "zoo": "at", "market": "at", "playground": "at",
        "farm": "on", "hill": "on", "mountain": "on", "island": "on", "bridge": "on", "lake": "by",
        "river": "by", "pond": "by", "bakery": "at", "museum": "at", "station": "at", "circus": "at"}
ADJS = ["red", "blue", "green", "yellow", "pink", "purple", "orange", "white", "black", "brown", "shiny",
        "big", "little", "old", "new", "soft", "tiny", "golden", "silver", "striped", "magic", "broken",
        "heavy", "funny", "secret", "wooden", "round", "sparkly", "dusty", "warm"]
OBJECTS = ["ball", "kite", "hat", "book", "box", "boat", "car", "doll", "drum", "cup", "key", "bike", "shoe",
           "spoon", "balloon", "bucket", "rope", "shell", "stone", "flower", "leaf", "teddy bear", "train",
           "truck", "whistle", "map", "lamp", "bell", "ring", "scarf", "basket", "blanket", "crayon", "robot",
           "puzzle", "jar", "feather", "coin", "umbrella", "egg", "clock", "mirror", "wand", "crown", "sword",
           "letter", "seed", "bottle", "sock", "kettle", "button", "flag", "trumpet", "pillow", "hammer"]
FOODS = ["apples", "cookies", "cake", "bread", "carrots", "berries", "soup", "pie", "honey", "cheese", "grapes",
         "pancakes", "nuts", "muffins", "oranges", "candy", "sandwiches", "pears", "rice", "noodles", "plums",
         "pumpkin pie", "jam", "lemonade", "ice cream", "popcorn"]
WEATHER = ["The sun was shining.", "The sky was blue and clear.", "It was a warm day.", "A cool wind was blowing.",
           "The clouds were white and fluffy.", "It was a bright morning.", "Birds were singing in the trees.",
           "The grass was wet with rain.", "It was a sunny day.", "The air smelled of flowers.",
           "Leaves fell from the trees.", "Snow covered the ground.", "It was a cold and windy night.",
           "Rain tapped on the windows.", "The moon was big and round.", "It was the first day of spring.",
           "Fog hung over the hills.", "The stars were twinkling."]
GOOD = ["happy", "glad", "proud", "excited", "joyful", "thankful", "calm", "surprised", "hopeful", "warm inside"]
BAD = ["sad", "worried", "scared", "upset", "lonely", "angry", "confused", "nervous", "tired", "grumpy"]
ACTS = ["play tag", "build a sandcastle", "draw pictures", "sing songs", "play hide and seek", "look for bugs",
        "pick flowers", "fly a kite", "jump in puddles", "read books", "bake cakes", "ride bikes", "play ball",
        "count the stars", "make a fort", "dance", "climb trees", "collect shells", "paint", "tell jokes",
        "splash in the water", "watch the clouds", "plant seeds", "explore"]
MORALS = ["Sharing makes everyone happy.", "It is good to help your friends.", "Being kind is the best thing you "
          "can do.", "Friends make everything better.", "It is okay to ask for help.", "Trying again is how you learn.",
          "Being brave means doing it even when you are scared.", "Saying sorry can fix a lot.",
          "Small friends can do big things.", "Listening is a kind of magic.", "Home is where your friends are.",
          "Everyone is good at something."]
SAY = ["said", "said", "said", "said", "shouted", "whispered", "cried", "laughed", "called", "replied"]
TIMES = ["One day", "One morning", "One sunny afternoon", "Later that day", "The next morning", "That evening",
         "One cold winter day", "Early one morning", "One rainy day", "After lunch", "On Saturday"]
LINKS = ["Then", "Soon", "After a while", "Suddenly", "Just then", "A moment later", "Later", "At first",
         "Before long"]


def a_an(w):
    return ("an " if w[0] in "aeiou" else "a ") + w


def at(place):
    return f"{PREP.get(place, 'in')} the {place}"


class Char:
    def __init__(self, rng, used, human_p=0.55):
        self.sex = rng.choice("fm")
        name = invent_name(rng, self.sex)
        while name in used:
            name = invent_name(rng, self.sex)
        used.add(name)
        self.name = name
        self.kind = rng.choice(HUMAN[self.sex]) if rng.random() < human_p else rng.choice(CREATURES)
        self.trait = rng.choice(TRAITS)
        self.he, self.him, self.his = ("she", "her", "her") if self.sex == "f" else ("he", "him", "his")
        self.He, self.His = self.he.capitalize(), self.his.capitalize()
        self.home = rng.choice(PLACES)
        self.parent = rng.choice(["mom", "dad", "grandma", "grandpa", "aunt", "uncle", "big sister", "big brother"])


# ----------------------------------------------------------------------------- pieces

def quote(rng, who, words, end="."):
    """A line of dialogue in one of several shapes."""
    verb = rng.choice(SAY)
    if words.endswith("?"):
        verb = "asked"
    r = rng.random()
    if r < 0.45:
        return f"\"{words}\" {verb} {who}." if words[-1] in "?!" else f"\"{words[:-1]},\" {verb} {who}."
    if r < 0.7:
        return f"{who} {verb}, \"{words}\""
    if r < 0.85 and words[-1] == ".":
        parts = words.split(". ", 1)
        if len(parts) == 2:
            return f"\"{parts[0]},\" {verb} {who}. \"{parts[1]}\""
    return f"\"{words}\""


def opening(rng, h, place):
    H = h.name
    return rng.choice([
        f"Once upon a time, there was {a_an(h.trait)} {h.kind} named {H}.",
        f"Once upon a time, {a_an(h.kind)} named {H} lived {at(place)}.",
        f"There once was {a_an(h.trait)} {h.kind} called {H}.",
        f"Once upon a time, in a land far away, there lived {a_an(h.kind)} named {H}.",
        f"Long ago, {at(place)}, lived {a_an(h.trait)} {h.kind}. {h.His} name was {H}.",
        f"{H} was {a_an(h.trait)} {h.kind} who lived {at(place)}.",
        f"Once there was {a_an(h.kind)}, and {h.his} name was {H}.",
        f"In a little house near the {place} lived {a_an(h.kind)} named {H}.",
        f"{rng.choice(TIMES)}, {a_an(h.trait)} {h.kind} named {H} went to the {place}.",
        f"Have you ever met {a_an(h.kind)} named {H}? {h.He} lived {at(place)}.",
    ])


def detail(rng, h, obj, food, act):
    H = h.name
    return rng.choice([
        f"{h.He} loved to {act}.", f"{H} liked to {act} with {h.his} {h.parent}.", f"{h.He} had {a_an(obj)}.",
        f"Every day, {H} went to the {h.home}.", f"{H} lived with {h.his} {h.parent} in a small house.",
        f"{h.He} was very {h.trait} and loved {food}.", f"{H}'s favorite food was {food}.",
        f"More than anything, {H} wanted to {act}.", f"{h.He} was only {a_an(rng.choice(['little', 'small']))} "
        f"{h.kind}, but {h.he} had a big heart.", f"Everyone knew {H} because {h.he} was so {h.trait}.",
    ])


def ending(rng, h, f):
    H, F = h.name, f.name
    return rng.choice([
        f"From that day on, {H} and {F} were best friends.", f"{H} smiled all the way home.",
        f"That night, {H} went to sleep with a big smile.", f"{H} never forgot that day.",
        f"And {H} lived happily ever after.", f"It was the best day ever for {H}.",
        f"{H} and {F} played together until the sun went down.", f"{H} hugged {F} and said, \"Thank you.\"",
        f"When {H} got home, {h.he} told {h.his} {h.parent} all about it.", f"The end.",
        f"{F} waved goodbye, and {H} waved back.", f"Now {H} and {F} meet {at(f.home)} every week.",
    ])


# ----------------------------------------------------------------------------- plots

def plot_lost(rng, h, f, c):
    H, F, obj, place = h.name, f.name, c["obj"], c["place"]
    spot = rng.choice(["under a bush", "near the water", "in the grass", "behind a big rock", "next to a tree",
                       "inside an old boot", "on top of the fence", "in a bird's nest"])
    return [f"{H} had {a_an(obj)} that {h.he} loved very much.", f"{rng.choice(TIMES)}, {H} took the {obj} to the {place}.",
            rng.choice([f"But when {h.he} looked down, the {obj} was gone!",
                        f"{h.He} played and played, and then {h.he} could not find the {obj}."]),
            f"{H} felt {rng.choice(BAD)}.", quote(rng, H, f"Where is my {obj}?"),
            f"{rng.choice(LINKS)}, {F} the {f.kind} came by.", quote(rng, F, f"What is wrong, {H}?"),
            quote(rng, H, f"I lost my {obj}."), quote(rng, F, "I will help you look for it."),
            rng.choice([f"{H} and {F} looked under the trees and behind the rocks.", f"They looked everywhere {at(place)}.",
                        f"{F} looked high and {H} looked low."]),
            f"At last, {F} found the {obj} {spot}.", quote(rng, F, "Here it is!"),
            f"{H} was so {rng.choice(GOOD)}.", quote(rng, H, f"Thank you, {F}!")]


def plot_share(rng, h, f, c):
    H, F, food = h.name, f.name, c["food"]
    return [f"{H} had a basket of {food}.", f"{h.He} went to the {c['place']} and saw {F}, {a_an(f.trait)} {f.kind}.",
            f"{F} looked {rng.choice(BAD)}. {f.He} had nothing to eat.",
            f"{H} thought for a moment. Then {h.he} said, \"{F}, would you like some {food}?\"",
            f"{F} smiled. \"Yes, please!\" {f.he} said.", f"{H} gave {F} half of the {food}.",
            rng.choice([f"The {food} tasted even better when they ate together.",
                        f"{H} and {F} sat {at(c['place'])} and ate the {food}.",
                        f"{F} said, \"You are a good friend, {H}.\""]),
            f"After that, {F} shared {f.his} {c['obj']} with {H}."]


def plot_stuck(rng, h, f, c):
    H, F, obj = h.name, f.name, c["obj"]
    top = rng.choice(["a tall tree", "the roof", "a high shelf", "the top of the fence", "a thorny bush"])
    return [f"{H} and {F} were playing with {a_an(obj)} {at(c['place'])}.",
            f"{F} threw the {obj} very high, and it got stuck on {top}.", quote(rng, H, f"Oh no! The {obj} is stuck!"),
            f"{F} tried to jump, but {f.he} could not reach it.", f"{H} tried to climb up, but it was too high.",
            rng.choice([f"Then {H} had an idea. {h.He} asked {h.his} {h.parent} for help.",
                        f"Then a big bird flew down and pushed the {obj} with its wing.",
                        f"Then {H} found a long stick and poked the {obj}.",
                        f"Then {F} stood on {H}'s shoulders and grabbed it."]),
            f"The {obj} fell down, and {F} caught it.", quote(rng, H, "We did it!")]


def plot_fear(rng, h, f, c):
    H, F = h.name, f.name
    thing = rng.choice(["the dark", "the big dog next door", "the tall slide", "the deep water", "thunder",
                        "the old bridge", "spiders", "the noisy train", "the cave"])
    return [f"{H} was scared of {thing}.", f"{rng.choice(TIMES)}, {F} asked {H} to come to the {c['place']}.",
            quote(rng, H, f"I can't. I am scared of {thing}."), f"{F} held {H}'s hand.",
            quote(rng, F, "I will stay with you."), f"{H} took a deep breath. {h.He} was brave and went with {F}.",
            rng.choice([f"It was not so bad after all. {H} even laughed.", f"Soon {H} was not scared anymore.",
                        f"{H} found out that {thing} was not so scary."]), quote(rng, F, f"You were so brave, {H}!")]


def plot_broken(rng, h, f, c):
    H, F, obj = h.name, f.name, c["obj"]
    return [f"{F} had {a_an(obj)}. {f.He} loved it very much.", f"{rng.choice(TIMES)}, {H} wanted to play with the {obj}.",
            quote(rng, H, f"Can I play with your {obj}?"), quote(rng, F, "Yes, but be careful."),
            f"{H} played with the {obj}, but it fell and broke.", f"{F} was {rng.choice(BAD)}. {H} felt bad too.",
            quote(rng, H, f"I am sorry, {F}. I will help you fix it."),
            rng.choice([f"{H} and {F} fixed the {obj} with some glue.", f"{H}'s {h.parent} helped them fix the {obj}.",
                        f"They worked together all afternoon to fix the {obj}."]),
            f"Soon the {obj} was as good as new. {F} smiled at {H}."]


def plot_gift(rng, h, f, c):
    H, F, obj = h.name, f.name, c["obj"]
    return [f"It was {F}'s birthday.", f"{H} wanted to give {F} a special present.",
            f"{h.He} went to the {c['place']} to look for something nice.", f"There {h.he} found {a_an(obj)}.",
            f"\"{F} will love this {obj},\" thought {H}.", f"{H} wrapped the {obj} in paper and gave it to {F}.",
            f"{F} opened the present and saw the {obj}.", quote(rng, F, f"Wow, {a_an(obj)}! Thank you, {H}!")]


def plot_learn(rng, h, f, c):
    H, F = h.name, f.name
    skill = rng.choice(["ride a bike", "swim", "read", "whistle", "tie {his} shoes", "climb a tree", "bake bread",
                        "skip a stone", "jump rope", "paint a picture", "fly", "count to one hundred",
                        "play the drum", "build a boat"]).format(his=h.his)
    return [f"{H} wanted to learn how to {skill}.", f"{h.He} tried, but it was very hard.",
            f"{H} felt {rng.choice(BAD)}.", quote(rng, H, f"I will never learn to {skill}."),
            f"{F} saw {H} and said, \"Do not give up, {H}. Try again!\"", f"{H} tried again and again.",
            f"At last, {H} could {skill}!", quote(rng, H, f"Look, {F}! I did it!"), f"{F} clapped {f.his} hands."]


def plot_found(rng, h, f, c, used):
    H, F, obj = h.name, f.name, c["obj"]
    o = Char(rng, used)
    O = o.name
    return [f"{H} and {F} went for a walk to the {c['place']}.", f"On the way, they found {a_an(obj)} on the ground.",
            quote(rng, F, f"Whose {obj} is this?"), quote(rng, H, "I don't know. Let's find out."),
            f"They walked and walked until they met {a_an(o.kind)} named {O}.", f"{O} was crying.",
            quote(rng, O, f"I lost my {obj}."), f"{H} gave the {obj} back to {O}.",
            f"{O} was very {rng.choice(GOOD)}.", quote(rng, O, f"Thank you, {H} and {F}!")]


def plot_journey(rng, h, f, c, used):
    H, F = h.name, f.name
    town = invent_name(rng, "f")
    goal = rng.choice(["the tallest mountain", "the end of the river", "the edge of the sea", "the old castle",
                       "the land of the giants", "the hidden valley"])
    o = Char(rng, used)
    return [f"{H} wanted to see {goal}.", f"{h.He} packed {a_an(c['obj'])} and some {c['food']}.",
            f"{H} walked past the {c['place']} and over the hills until {h.he} came to a town called {town}.",
            f"In {town}, {h.he} met {a_an(o.kind)} named {o.name}.", quote(rng, o.name, f"Where are you going, {H}?"),
            quote(rng, H, f"I am going to {goal}."), quote(rng, o.name, f"Then I will show you the way."),
            f"{o.name} and {H} walked together for three days.",
            rng.choice([f"At last they reached {goal}. It was more beautiful than {H} had dreamed.",
                        f"When they reached {goal}, {F} was already there, waiting for them."]),
            f"{H} thanked {o.name} and promised to visit {town} again."]


def plot_storm(rng, h, f, c):
    H, F = h.name, f.name
    return [f"{rng.choice(TIMES)}, dark clouds filled the sky.", f"{H} and {F} were {at(c['place'])} when the rain began.",
            quote(rng, F, "We need to find a dry place!"), f"They ran to {a_an(rng.choice(['old barn', 'big tree', 'cave', 'little hut']))}.",
            f"{F} was shaking, so {H} gave {f.him} {h.his} {c['obj']}.",
            f"They told stories and sang songs while the storm roared.", f"When the storm was over, a rainbow appeared.",
            quote(rng, H, "Look at all the colors!"), f"{F} and {H} walked home, {rng.choice(GOOD)} and safe."]


def plot_pet(rng, h, f, c, used):
    H = h.name
    pet = rng.choice(["puppy", "kitten", "bunny", "turtle", "parrot", "hamster", "goldfish", "pony"])
    P = invent_name(rng, rng.choice("fm"))
    while P in used:
        P = invent_name(rng, "f")
    used.add(P)
    return [f"{H} had a little {pet} named {P}.", f"{P} liked to {rng.choice(ACTS)}.",
            f"{rng.choice(TIMES)}, {P} ran away from the {h.home}.", f"{H} looked everywhere for {P}.",
            quote(rng, H, f"{P}! {P}! Where are you?"), f"{H} asked {f.name} for help.",
            f"{f.name} and {H} searched {at(c['place'])}.", f"At last they heard a small sound.",
            f"It was {P}! The {pet} was hiding {rng.choice(['in a box', 'under a bench', 'behind the door', 'in the tall grass'])}.",
            f"{H} picked up {P} and held {rng.choice(['it', 'it close'])}.", quote(rng, H, f"I missed you, {P}.")]


def plot_contest(rng, h, f, c):
    H, F = h.name, f.name
    thing = rng.choice(["the biggest cake", "the best kite", "the funniest hat", "the tallest tower of blocks",
                        "the prettiest painting", "the loudest song"])
    return [f"There was a contest {at(c['place'])} for {thing}.", f"{H} and {F} both wanted to win.",
            f"{H} worked all morning. {F} worked all afternoon.",
            f"But on the day of the contest, {F}'s {c['obj']} fell into a puddle.", f"{F} was {rng.choice(BAD)}.",
            f"{H} had a choice. {h.He} could win, or {h.he} could help {h.his} friend.",
            f"{H} helped {F}, and they finished just in time.", quote(rng, F, f"Why did you help me, {H}?"),
            quote(rng, H, "Because friends help each other."),
            rng.choice([f"They did not win, but they laughed all the way home.",
                        f"The judge gave a prize to both of them for being kind."])]


def plot_wish(rng, h, f, c):
    H = h.name
    wish = rng.choice(["to fly", "to talk to the animals", "to be very tall", "to have a hundred " + c["food"],
                       "to live in the sky", "to be invisible"])
    helper = rng.choice(["a wise owl", "a tiny fairy", "an old wizard", "a talking fish", "a golden star"])
    return [f"{H} had a big wish. {h.He} wanted {wish}.", f"{rng.choice(TIMES)}, {H} met {helper} {at(c['place'])}.",
            quote(rng, H, f"Can you help me? I want {wish}."), f"The {helper.split(' ', 1)[1]} smiled and said, "
            f"\"Your wish will come true, but only for one day.\"",
            f"The next morning, {H}'s wish came true!", f"At first it was wonderful.",
            f"But soon {H} missed {h.his} {h.parent} and {h.his} friend {f.name}.",
            f"When the day was over, {H} was {rng.choice(GOOD)} to be just {h.him}self again."]


PLOTS = [plot_lost, plot_share, plot_stuck, plot_fear, plot_broken, plot_gift, plot_learn, plot_storm,
         plot_contest, plot_wish]
PLOTS_USED = [plot_found, plot_journey, plot_pet]


def story(rng, spelled=False):
    """One story; spelled=True names its characters and towns with spelled_name."""
    _name_source[0] = spelled_name if spelled else new_name
    try:
        return _story(rng)
    finally:
        _name_source[0] = new_name


def either_name(rng, sex):
    return spelled_name(rng, sex) if rng.random() < 0.5 else new_name(rng, sex)


def recall_story(rng, exclude=()):
    """A story whose hero's name comes back at once and often: names from either generator (half spelled
    from letters, half from syllables, so a changed syllable is never a safe guess), the sentence after the
    opening names the hero, and when the friend's pronoun differs, half of the sentences that would start
    with the hero's He/She start with the name. `exclude`: names never to invent (held-out prompts')."""
    _name_source[0] = either_name
    try:
        return _story(rng, set(exclude), recall=True)
    finally:
        _name_source[0] = new_name


def recall_sentence(rng, h, c):
    H = h.name
    return rng.choice([
        f"{H} liked to {c['act']}.", f"Every day, {H} went to the {h.home}.", f"{H} was very {h.trait}.",
        f"{H} had {a_an(c['obj'])}.", f"{H}'s favorite food was {c['food']}.", f"Everyone loved {H}.",
        f"{H} lived with {h.his} {h.parent}.", f"One morning, {H} woke up early.",
        f"\"Hello!\" said {H}.", f"{H} was {a_an(h.trait)} {h.kind}, and {H} was always busy.",
    ])


def name_pronouns(rng, h, f, sentences):
    """Half of the sentences that start with the hero's He/She start with the name instead."""
    if h.sex == f.sex:
        return sentences
    pat = re.compile(r"(^|(?<=[.!?] ))" + h.He + r"\b")
    return [pat.sub(lambda m: m.group(1) + (h.name if rng.random() < 0.5 else h.He), x) for x in sentences]


def _story(rng, used=None, recall=False, first_line=None):
    used = set() if used is None else used
    h, f = Char(rng, used), Char(rng, used)
    c = dict(place=rng.choice(PLACES), obj=rng.choice(ADJS) + " " + rng.choice(OBJECTS), food=rng.choice(FOODS),
             act=rng.choice(ACTS))
    s = [first_line(rng, h, c["place"], c) if first_line else opening(rng, h, c["place"])]
    if recall and rng.random() < 0.85:
        s.append(recall_sentence(rng, h, c))
    for _ in range(rng.choice([0, 1, 1, 2])):
        s.append(detail(rng, h, c["obj"], c["food"], c["act"]))
    if rng.random() < 0.4:
        s.append(rng.choice(WEATHER))
    if rng.random() < 0.35:
        s.append(f"{h.His} best friend was {a_an(f.trait)} {f.kind} named {f.name}.")
    k = rng.randrange(len(PLOTS) + len(PLOTS_USED))
    s += PLOTS[k](rng, h, f, c) if k < len(PLOTS) else PLOTS_USED[k - len(PLOTS)](rng, h, f, c, used)
    if rng.random() < 0.25:  # a second episode: longer contexts, more name reuse
        k2 = (k + 1 + rng.randrange(len(PLOTS) - 1)) % len(PLOTS)
        s.append(rng.choice(LINKS[:5]) + ", something else happened.")
        s += PLOTS[k2](rng, h, f, c)
    if rng.random() < 0.8:
        s.append(ending(rng, h, f))
    if rng.random() < 0.25:
        s.append(rng.choice(MORALS))
    if recall:
        s = name_pronouns(rng, h, f, s)
    # paragraphs at random sentence boundaries
    out, para = [], []
    for x in s:
        para.append(x)
        if len(para) >= 3 and rng.random() < 0.3:
            out.append(" ".join(para))
            para = []
    if para:
        out.append(" ".join(para))
    return "\n\n".join(out)
