import sys

sys.path.insert(0, "/app")


def test_fib_small_values():
    from fib import fib

    assert [fib(n) for n in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]


def test_fib_forty():
    from fib import fib

    assert fib(40) == 102334155
