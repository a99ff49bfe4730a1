"""Corpus: dictionary functions."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "word_frequencies",
        '''
        def word_frequencies(text):
            """How often each lower-cased word occurs; words are split on whitespace."""
            counts = {}
            for word in text.lower().split():
                counts[word] = counts.get(word, 0) + 1
            return counts
    ''',
        [
            "assert word_frequencies('the cat the hat') == {'the': 2, 'cat': 1, 'hat': 1}",
            "assert word_frequencies('') == {}",
            "assert word_frequencies('A a A') == {'a': 3}",
            "assert word_frequencies('one') == {'one': 1}",
        ],
        "dicts",
    ),
    program(
        "invert_dict",
        '''
        def invert_dict(mapping):
            """Map each value to the sorted list of keys that had it."""
            out = {}
            for key, value in mapping.items():
                out.setdefault(value, []).append(key)
            for value in out:
                out[value].sort()
            return out
    ''',
        [
            "assert invert_dict({'a': 1, 'b': 2, 'c': 1}) == {1: ['a', 'c'], 2: ['b']}",
            "assert invert_dict({}) == {}",
            "assert invert_dict({'z': 0, 'y': 0}) == {0: ['y', 'z']}",
            "assert invert_dict({1: 'x'}) == {'x': [1]}",
        ],
        "dicts",
    ),
    program(
        "group_by_length",
        '''
        def group_by_length(words):
            """Group words by length: {length: [words in order]}."""
            groups = {}
            for word in words:
                groups.setdefault(len(word), []).append(word)
            return groups
    ''',
        [
            "assert group_by_length(['a', 'bb', 'c', 'dd', 'eee']) == {1: ['a', 'c'], 2: ['bb', 'dd'], 3: ['eee']}",
            "assert group_by_length([]) == {}",
            "assert group_by_length(['']) == {0: ['']}",
            "assert group_by_length(['xy', 'z']) == {2: ['xy'], 1: ['z']}",
        ],
        "dicts",
    ),
    program(
        "merge_counts",
        '''
        def merge_counts(a, b):
            """Add two count dictionaries key by key."""
            out = dict(a)
            for key, value in b.items():
                out[key] = out.get(key, 0) + value
            return out
    ''',
        [
            "assert merge_counts({'x': 1}, {'x': 2, 'y': 3}) == {'x': 3, 'y': 3}",
            "assert merge_counts({}, {}) == {}",
            "assert merge_counts({'a': 5}, {}) == {'a': 5}",
            "assert merge_counts({}, {'b': 2}) == {'b': 2}",
            "a = {'k': 1}\nmerge_counts(a, {'k': 1})\nassert a == {'k': 1}",
        ],
        "dicts",
    ),
    program(
        "top_k_frequent",
        '''
        def top_k_frequent(items, k):
            """The k most frequent items, most frequent first; ties by first appearance."""
            counts = {}
            for item in items:
                counts[item] = counts.get(item, 0) + 1
            order = sorted(counts, key=lambda item: -counts[item])
            return order[:k]
    ''',
        [
            "assert top_k_frequent([1, 1, 1, 2, 2, 3], 2) == [1, 2]",
            "assert top_k_frequent([], 3) == []",
            "assert top_k_frequent(['a', 'b', 'a'], 1) == ['a']",
            "assert top_k_frequent(['x', 'y'], 2) == ['x', 'y']",
            "assert top_k_frequent([3, 2, 2, 3, 1], 3) == [3, 2, 1]",
        ],
        "dicts",
    ),
    program(
        "nested_get",
        '''
        def nested_get(data, path, default=None):
            """Follow keys in path (a dot-separated string) through nested dicts."""
            current = data
            for key in path.split("."):
                if not isinstance(current, dict) or key not in current:
                    return default
                current = current[key]
            return current
    ''',
        [
            "assert nested_get({'a': {'b': {'c': 1}}}, 'a.b.c') == 1",
            "assert nested_get({'a': {'b': 2}}, 'a.x') is None",
            "assert nested_get({'a': 1}, 'a.b', 'no') == 'no'",
            "assert nested_get({'a': {'b': 2}}, 'a') == {'b': 2}",
            "assert nested_get({}, 'a', 0) == 0",
        ],
        "dicts",
    ),
    program(
        "dict_diff",
        '''
        def dict_diff(old, new):
            """(added keys, removed keys, changed keys), each sorted."""
            added = sorted(k for k in new if k not in old)
            removed = sorted(k for k in old if k not in new)
            changed = sorted(k for k in old if k in new and old[k] != new[k])
            return added, removed, changed
    ''',
        [
            "assert dict_diff({'a': 1, 'b': 2}, {'b': 3, 'c': 4}) == (['c'], ['a'], ['b'])",
            "assert dict_diff({}, {}) == ([], [], [])",
            "assert dict_diff({'a': 1}, {'a': 1}) == ([], [], [])",
            "assert dict_diff({'x': 1}, {}) == ([], ['x'], [])",
            "assert dict_diff({}, {'y': 0}) == (['y'], [], [])",
        ],
        "dicts",
    ),
    program(
        "char_positions",
        '''
        def char_positions(text):
            """Map each character to the list of indices where it occurs."""
            positions = {}
            for i, ch in enumerate(text):
                if ch not in positions:
                    positions[ch] = []
                positions[ch].append(i)
            return positions
    ''',
        [
            "assert char_positions('abca') == {'a': [0, 3], 'b': [1], 'c': [2]}",
            "assert char_positions('') == {}",
            "assert char_positions('zz') == {'z': [0, 1]}",
            "assert char_positions('ab') == {'a': [0], 'b': [1]}",
        ],
        "dicts",
    ),
    program(
        "majority_element",
        '''
        def majority_element(items):
            """The item occurring more than len(items) / 2 times, or None."""
            counts = {}
            for item in items:
                counts[item] = counts.get(item, 0) + 1
                if counts[item] * 2 > len(items):
                    return item
            return None
    ''',
        [
            "assert majority_element([3, 3, 4]) == 3",
            "assert majority_element([1, 2]) is None",
            "assert majority_element([]) is None",
            "assert majority_element([2, 2, 1, 1]) is None",
            "assert majority_element([5]) == 5",
            "assert majority_element([1, 2, 2, 2, 1]) == 2",
        ],
        "dicts",
    ),
    program(
        "two_sum",
        '''
        def two_sum(values, target):
            """Indices (i, j), i < j, of the first pair that sums to target, or None."""
            seen = {}
            for j, v in enumerate(values):
                if target - v in seen:
                    return seen[target - v], j
                if v not in seen:
                    seen[v] = j
            return None
    ''',
        [
            "assert two_sum([2, 7, 11, 15], 9) == (0, 1)",
            "assert two_sum([3, 2, 4], 6) == (1, 2)",
            "assert two_sum([3, 3], 6) == (0, 1)",
            "assert two_sum([1, 2], 7) is None",
            "assert two_sum([], 0) is None",
            "assert two_sum([1, 5, 1, 5], 10) == (1, 3)",
        ],
        "dicts",
    ),
]
