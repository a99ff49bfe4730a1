"""Corpus: list functions."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "running_max",
        '''
        def running_max(values):
            """The maximum of each prefix: [1, 3, 2] -> [1, 3, 3]."""
            out = []
            best = None
            for v in values:
                if best is None or v > best:
                    best = v
                out.append(best)
            return out
    ''',
        [
            "assert running_max([1, 3, 2]) == [1, 3, 3]",
            "assert running_max([]) == []",
            "assert running_max([5, 4, 3]) == [5, 5, 5]",
            "assert running_max([-2, -1, -3]) == [-2, -1, -1]",
            "assert running_max([0, 0, 1]) == [0, 0, 1]",
        ],
        "lists",
    ),
    program(
        "chunk",
        '''
        def chunk(items, size):
            """Split items into consecutive lists of length size (the last may be shorter)."""
            return [items[i:i + size] for i in range(0, len(items), size)]
    ''',
        [
            "assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]",
            "assert chunk([], 3) == []",
            "assert chunk([1, 2, 3], 3) == [[1, 2, 3]]",
            "assert chunk([1, 2, 3], 1) == [[1], [2], [3]]",
            "assert chunk([1, 2], 5) == [[1, 2]]",
        ],
        "lists",
    ),
    program(
        "flatten_once",
        '''
        def flatten_once(nested):
            """Flatten one level: [[1, 2], [3], []] -> [1, 2, 3]."""
            out = []
            for inner in nested:
                for item in inner:
                    out.append(item)
            return out
    ''',
        [
            "assert flatten_once([[1, 2], [3], []]) == [1, 2, 3]",
            "assert flatten_once([]) == []",
            "assert flatten_once([[], []]) == []",
            "assert flatten_once([['a'], ['b', 'c']]) == ['a', 'b', 'c']",
            "assert flatten_once([[[1]], [2]]) == [[1], 2]",
        ],
        "lists",
    ),
    program(
        "rotate_left",
        '''
        def rotate_left(items, k):
            """Rotate items left by k places (k may exceed the length)."""
            if not items:
                return []
            k = k % len(items)
            return items[k:] + items[:k]
    ''',
        [
            "assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]",
            "assert rotate_left([1, 2, 3], 0) == [1, 2, 3]",
            "assert rotate_left([1, 2, 3], 3) == [1, 2, 3]",
            "assert rotate_left([1, 2, 3], 4) == [2, 3, 1]",
            "assert rotate_left([], 2) == []",
            "assert rotate_left([1, 2, 3, 4, 5], 2) == [3, 4, 5, 1, 2]",
        ],
        "lists",
    ),
    program(
        "dedupe",
        '''
        def dedupe(items):
            """Drop repeated items, keeping the first occurrence of each, in order."""
            seen = set()
            out = []
            for item in items:
                if item not in seen:
                    seen.add(item)
                    out.append(item)
            return out
    ''',
        [
            "assert dedupe([1, 2, 1, 3, 2]) == [1, 2, 3]",
            "assert dedupe([]) == []",
            "assert dedupe(['a', 'a', 'a']) == ['a']",
            "assert dedupe([3, 2, 1]) == [3, 2, 1]",
            "assert dedupe([1, 1, 2, 2, 1]) == [1, 2]",
        ],
        "lists",
    ),
    program(
        "second_largest",
        '''
        def second_largest(values):
            """The second largest distinct value, or None if there is none."""
            largest = second = None
            for v in values:
                if largest is None or v > largest:
                    if largest is not None:
                        second = largest
                    largest = v
                elif v != largest and (second is None or v > second):
                    second = v
            return second
    ''',
        [
            "assert second_largest([3, 1, 4, 1, 5]) == 4",
            "assert second_largest([5, 5, 5]) is None",
            "assert second_largest([]) is None",
            "assert second_largest([1, 2]) == 1",
            "assert second_largest([2, 1]) == 1",
            "assert second_largest([-1, -5, -3]) == -3",
            "assert second_largest([7, 7, 3]) == 3",
        ],
        "lists",
    ),
    program(
        "merge_sorted",
        '''
        def merge_sorted(a, b):
            """Merge two sorted lists into one sorted list."""
            i = j = 0
            out = []
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            out.extend(a[i:])
            out.extend(b[j:])
            return out
    ''',
        [
            "assert merge_sorted([1, 3, 5], [2, 4, 6]) == [1, 2, 3, 4, 5, 6]",
            "assert merge_sorted([], [1, 2]) == [1, 2]",
            "assert merge_sorted([1, 2], []) == [1, 2]",
            "assert merge_sorted([1, 1], [1]) == [1, 1, 1]",
            "assert merge_sorted([5, 6], [1, 2]) == [1, 2, 5, 6]",
            "assert merge_sorted([1, 4], [2, 3, 9]) == [1, 2, 3, 4, 9]",
        ],
        "lists",
    ),
    program(
        "binary_search",
        '''
        def binary_search(items, target):
            """Index of target in the sorted list items, or -1."""
            lo, hi = 0, len(items) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if items[mid] == target:
                    return mid
                if items[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return -1
    ''',
        [
            "assert binary_search([1, 3, 5, 7, 9], 7) == 3",
            "assert binary_search([1, 3, 5, 7, 9], 1) == 0",
            "assert binary_search([1, 3, 5, 7, 9], 9) == 4",
            "assert binary_search([1, 3, 5, 7, 9], 4) == -1",
            "assert binary_search([], 1) == -1",
            "assert binary_search([2], 2) == 0",
        ],
        "lists",
    ),
    program(
        "moving_average",
        '''
        def moving_average(values, window):
            """Averages of each run of window consecutive values."""
            out = []
            for i in range(len(values) - window + 1):
                out.append(sum(values[i:i + window]) / window)
            return out
    ''',
        [
            "assert moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]",
            "assert moving_average([1, 2, 3], 3) == [2.0]",
            "assert moving_average([1, 2], 3) == []",
            "assert moving_average([4, 8], 1) == [4.0, 8.0]",
            "assert moving_average([2, 4, 6, 8], 3) == [4.0, 6.0]",
        ],
        "lists",
    ),
    program(
        "pairwise_differences",
        '''
        def pairwise_differences(values):
            """Differences of neighbours: [1, 4, 9] -> [3, 5]."""
            return [values[i + 1] - values[i] for i in range(len(values) - 1)]
    ''',
        [
            "assert pairwise_differences([1, 4, 9]) == [3, 5]",
            "assert pairwise_differences([]) == []",
            "assert pairwise_differences([7]) == []",
            "assert pairwise_differences([5, 3, 3]) == [-2, 0]",
            "assert pairwise_differences([0, 10, 5, 6]) == [10, -5, 1]",
        ],
        "lists",
    ),
    program(
        "partition_even_odd",
        '''
        def partition_even_odd(values):
            """(evens, odds), each in the original order."""
            evens, odds = [], []
            for v in values:
                if v % 2 == 0:
                    evens.append(v)
                else:
                    odds.append(v)
            return evens, odds
    ''',
        [
            "assert partition_even_odd([1, 2, 3, 4]) == ([2, 4], [1, 3])",
            "assert partition_even_odd([]) == ([], [])",
            "assert partition_even_odd([0, -1, -2]) == ([0, -2], [-1])",
            "assert partition_even_odd([5, 7]) == ([], [5, 7])",
        ],
        "lists",
    ),
    program(
        "max_subarray_sum",
        '''
        def max_subarray_sum(values):
            """Largest sum of a non-empty run of consecutive values (Kadane)."""
            best = current = values[0]
            for v in values[1:]:
                current = max(v, current + v)
                best = max(best, current)
            return best
    ''',
        [
            "assert max_subarray_sum([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6",
            "assert max_subarray_sum([1]) == 1",
            "assert max_subarray_sum([-3, -1, -2]) == -1",
            "assert max_subarray_sum([2, 3, -10, 4]) == 5",
            "assert max_subarray_sum([5, -1, 5]) == 9",
        ],
        "lists",
    ),
    program(
        "insertion_sort",
        '''
        def insertion_sort(values):
            """A sorted copy of values, by insertion sort."""
            out = list(values)
            for i in range(1, len(out)):
                key = out[i]
                j = i - 1
                while j >= 0 and out[j] > key:
                    out[j + 1] = out[j]
                    j -= 1
                out[j + 1] = key
            return out
    ''',
        [
            "assert insertion_sort([3, 1, 2]) == [1, 2, 3]",
            "assert insertion_sort([]) == []",
            "assert insertion_sort([1, 2, 3]) == [1, 2, 3]",
            "assert insertion_sort([5, 4, 3, 2, 1]) == [1, 2, 3, 4, 5]",
            "assert insertion_sort([2, 2, 1]) == [1, 2, 2]",
            "xs = [3, 1]\ninsertion_sort(xs)\nassert xs == [3, 1]",
        ],
        "lists",
    ),
]
