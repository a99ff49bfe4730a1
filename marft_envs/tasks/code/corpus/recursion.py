"""Corpus: recursive functions."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "factorial",
        '''
        def factorial(n):
            """n! for n >= 0."""
            if n == 0:
                return 1
            return n * factorial(n - 1)
    ''',
        ["assert factorial(0) == 1", "assert factorial(1) == 1", "assert factorial(5) == 120", "assert factorial(10) == 3628800"],
        "recursion",
    ),
    program(
        "fibonacci",
        '''
        def fibonacci(n):
            """The n-th Fibonacci number: 0, 1, 1, 2, 3, 5, ..."""
            if n < 2:
                return n
            return fibonacci(n - 1) + fibonacci(n - 2)
    ''',
        [
            "assert fibonacci(0) == 0",
            "assert fibonacci(1) == 1",
            "assert fibonacci(2) == 1",
            "assert fibonacci(10) == 55",
            "assert [fibonacci(n) for n in range(7)] == [0, 1, 1, 2, 3, 5, 8]",
        ],
        "recursion",
    ),
    program(
        "power",
        '''
        def power(base, exp):
            """base ** exp for an integer exp >= 0, by repeated squaring."""
            if exp == 0:
                return 1
            half = power(base, exp // 2)
            if exp % 2 == 0:
                return half * half
            return half * half * base
    ''',
        [
            "assert power(2, 10) == 1024",
            "assert power(3, 0) == 1",
            "assert power(5, 1) == 5",
            "assert power(2, 7) == 128",
            "assert power(-2, 3) == -8",
        ],
        "recursion",
    ),
    program(
        "sum_nested",
        '''
        def sum_nested(items):
            """Sum of all numbers in an arbitrarily nested list."""
            total = 0
            for item in items:
                if isinstance(item, list):
                    total += sum_nested(item)
                else:
                    total += item
            return total
    ''',
        [
            "assert sum_nested([1, [2, 3], [[4]]]) == 10",
            "assert sum_nested([]) == 0",
            "assert sum_nested([[], [[]]]) == 0",
            "assert sum_nested([5]) == 5",
            "assert sum_nested([1, [-1, [2]]]) == 2",
        ],
        "recursion",
    ),
    program(
        "flatten_deep",
        '''
        def flatten_deep(items):
            """Flatten an arbitrarily nested list."""
            out = []
            for item in items:
                if isinstance(item, list):
                    out.extend(flatten_deep(item))
                else:
                    out.append(item)
            return out
    ''',
        [
            "assert flatten_deep([1, [2, [3, [4]]]]) == [1, 2, 3, 4]",
            "assert flatten_deep([]) == []",
            "assert flatten_deep([[[]]]) == []",
            "assert flatten_deep(['a', ['b']]) == ['a', 'b']",
        ],
        "recursion",
    ),
    program(
        "binary_strings",
        '''
        def binary_strings(n):
            """All strings of n binary digits, in increasing order."""
            if n == 0:
                return [""]
            shorter = binary_strings(n - 1)
            return ["0" + s for s in shorter] + ["1" + s for s in shorter]
    ''',
        [
            "assert binary_strings(0) == ['']",
            "assert binary_strings(1) == ['0', '1']",
            "assert binary_strings(2) == ['00', '01', '10', '11']",
            "assert len(binary_strings(5)) == 32",
        ],
        "recursion",
    ),
    program(
        "permutations",
        '''
        def permutations(items):
            """All orderings of items (a list of distinct values), in lexicographic order of positions."""
            if len(items) <= 1:
                return [list(items)]
            out = []
            for i in range(len(items)):
                rest = items[:i] + items[i + 1:]
                for perm in permutations(rest):
                    out.append([items[i]] + perm)
            return out
    ''',
        [
            "assert permutations([1, 2, 3]) == [[1, 2, 3], [1, 3, 2], [2, 1, 3], [2, 3, 1], [3, 1, 2], [3, 2, 1]]",
            "assert permutations([]) == [[]]",
            "assert permutations(['a']) == [['a']]",
            "assert len(permutations([1, 2, 3, 4])) == 24",
        ],
        "recursion",
    ),
    program(
        "depth",
        '''
        def depth(tree):
            """Depth of a tree given as nested (value, [children]) pairs; a leaf has depth 1."""
            value, children = tree
            if not children:
                return 1
            return 1 + max(depth(child) for child in children)
    ''',
        [
            "assert depth((1, [])) == 1",
            "assert depth((1, [(2, []), (3, [(4, [])])])) == 3",
            "assert depth((0, [(1, [(2, [(3, [])])])])) == 4",
            "assert depth(('a', [('b', []), ('c', [])])) == 2",
        ],
        "recursion",
    ),
    program(
        "hanoi_moves",
        '''
        def hanoi_moves(n, source="A", target="C", spare="B"):
            """The moves (from, to) that solve the Towers of Hanoi with n disks."""
            if n == 0:
                return []
            return (hanoi_moves(n - 1, source, spare, target) + [(source, target)]
                    + hanoi_moves(n - 1, spare, target, source))
    ''',
        [
            "assert hanoi_moves(0) == []",
            "assert hanoi_moves(1) == [('A', 'C')]",
            "assert hanoi_moves(2) == [('A', 'B'), ('A', 'C'), ('B', 'C')]",
            "assert len(hanoi_moves(5)) == 31",
        ],
        "recursion",
    ),
    program(
        "count_paths",
        '''
        def count_paths(rows, cols):
            """Monotone lattice paths from the top-left to the bottom-right of a rows x cols grid."""
            if rows == 1 or cols == 1:
                return 1
            return count_paths(rows - 1, cols) + count_paths(rows, cols - 1)
    ''',
        [
            "assert count_paths(1, 1) == 1",
            "assert count_paths(2, 2) == 2",
            "assert count_paths(3, 3) == 6",
            "assert count_paths(3, 4) == 10",
            "assert count_paths(1, 7) == 1",
        ],
        "recursion",
    ),
    program(
        "is_balanced",
        '''
        def is_balanced(text, depth=0):
            """True if the parentheses in text are balanced (recursive scan)."""
            if not text:
                return depth == 0
            if depth < 0:
                return False
            if text[0] == "(":
                return is_balanced(text[1:], depth + 1)
            if text[0] == ")":
                return is_balanced(text[1:], depth - 1)
            return is_balanced(text[1:], depth)
    ''',
        [
            "assert is_balanced('(())')",
            "assert is_balanced('')",
            "assert not is_balanced('(()')",
            "assert not is_balanced(')(')",
            "assert is_balanced('a(b)c')",
            "assert not is_balanced('())(')",
        ],
        "recursion",
    ),
]
