"""Synthetic ratings with planted structure for the end-to-end tests.

200 users x 100 items, two taste groups (a user likes the items of its own
parity: 4-5 stars, else 1-2); about 40% of the pairs rated. u.data format:
user \\t item \\t rating \\t timestamp.

  synthetic_ratings.py TRAIN [TEST]   with TEST, ~10% of the rows go there
"""
import random
import sys


def main():
    rnd = random.Random(7)
    train = open(sys.argv[1], "w")
    test = open(sys.argv[2], "w") if len(sys.argv) > 2 else None
    for u in range(1, 201):
        for i in range(1, 101):
            if rnd.random() > 0.4:
                continue
            likes = (i % 2) == (u % 2)
            r = rnd.choice([4, 5, 5]) if likes else rnd.choice([1, 2, 2])
            to_test = rnd.random() < 0.1
            out = test if (to_test and test is not None) else train
            out.write(f"{u}\t{i}\t{r}\t{880000000 + u * 100 + i}\n")
    train.close()
    if test is not None:
        test.close()


if __name__ == "__main__":
    main()
