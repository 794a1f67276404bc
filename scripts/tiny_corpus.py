"""Writes cmd/train/corpus/tiny.txt, the built-in corpus of `train sft`:
short, regular stories that a tiny byte-level model learns in a few
minutes on a CPU. Deterministic (seeded)."""
import random

random.seed(7)
names = ["Mia", "Tom", "Ada", "Leo", "Ivy", "Sam", "Zoe", "Max"]
animals = ["cat", "dog", "fox", "owl", "duck", "frog", "bee", "goat"]
places = ["the garden", "the park", "the river", "the old barn", "the hill", "the kitchen", "the forest", "the beach"]
things = ["a red ball", "a blue kite", "a small box", "a shiny stone", "a yellow hat", "a green leaf", "a warm cake", "a long rope"]
feel = ["happy", "sleepy", "curious", "brave", "hungry", "calm", "excited", "proud"]
lines = []
for i in range(160):
    n, a, p = random.choice(names), random.choice(animals), random.choice(places)
    t, f = random.choice(things), random.choice(feel)
    lines.append(f"{n} went to {p} with a {a}. The {a} found {t}. {n} felt {f}, and they went home together.")
with open("cmd/train/corpus/tiny.txt", "w") as out:
    out.write("\n\n".join(lines) + "\n")
