"""Corpus: string functions."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "reverse_words",
        '''
        def reverse_words(sentence):
            """Reverse the order of the words; words are separated by single spaces."""
            words = sentence.split(" ")
            return " ".join(words[::-1])
    ''',
        [
            "assert reverse_words('hello world') == 'world hello'",
            "assert reverse_words('a b c') == 'c b a'",
            "assert reverse_words('single') == 'single'",
            "assert reverse_words('') == ''",
            "assert reverse_words('one two three four') == 'four three two one'",
        ],
        "strings",
    ),
    program(
        "is_palindrome",
        '''
        def is_palindrome(text):
            """True if text reads the same backwards, ignoring case and non-letters."""
            letters = [c.lower() for c in text if c.isalpha()]
            i, j = 0, len(letters) - 1
            while i < j:
                if letters[i] != letters[j]:
                    return False
                i += 1
                j -= 1
            return True
    ''',
        [
            "assert is_palindrome('racecar')",
            "assert is_palindrome('A man, a plan, a canal: Panama')",
            "assert not is_palindrome('hello')",
            "assert is_palindrome('')",
            "assert not is_palindrome('ab')",
            "assert is_palindrome('Noon')",
            "assert not is_palindrome('abca')",
        ],
        "strings",
    ),
    program(
        "count_vowels",
        '''
        def count_vowels(text):
            """Number of vowels (a, e, i, o, u, either case) in text."""
            count = 0
            for ch in text.lower():
                if ch in "aeiou":
                    count += 1
            return count
    ''',
        [
            "assert count_vowels('hello') == 2",
            "assert count_vowels('AEIOU') == 5",
            "assert count_vowels('rhythm') == 0",
            "assert count_vowels('') == 0",
            "assert count_vowels('Programming in Python') == 5",
        ],
        "strings",
    ),
    program(
        "capitalize_words",
        '''
        def capitalize_words(text):
            """Upper-case the first letter of every space-separated word, lower-case the rest."""
            out = []
            for word in text.split(" "):
                if word:
                    out.append(word[0].upper() + word[1:].lower())
                else:
                    out.append(word)
            return " ".join(out)
    ''',
        [
            "assert capitalize_words('hello world') == 'Hello World'",
            "assert capitalize_words('pYTHON') == 'Python'",
            "assert capitalize_words('a  b') == 'A  B'",
            "assert capitalize_words('') == ''",
            "assert capitalize_words('x') == 'X'",
        ],
        "strings",
    ),
    program(
        "run_length_encode",
        '''
        def run_length_encode(text):
            """'aaabcc' -> 'a3b1c2'."""
            if not text:
                return ""
            out = []
            current, count = text[0], 1
            for ch in text[1:]:
                if ch == current:
                    count += 1
                else:
                    out.append(f"{current}{count}")
                    current, count = ch, 1
            out.append(f"{current}{count}")
            return "".join(out)
    ''',
        [
            "assert run_length_encode('aaabcc') == 'a3b1c2'",
            "assert run_length_encode('') == ''",
            "assert run_length_encode('a') == 'a1'",
            "assert run_length_encode('abc') == 'a1b1c1'",
            "assert run_length_encode('zzzz') == 'z4'",
            "assert run_length_encode('aabbaa') == 'a2b2a2'",
        ],
        "strings",
    ),
    program(
        "caesar_shift",
        '''
        def caesar_shift(text, shift):
            """Shift lower-case letters by shift places (wrapping around); other characters unchanged."""
            out = []
            for ch in text:
                if "a" <= ch <= "z":
                    out.append(chr((ord(ch) - ord("a") + shift) % 26 + ord("a")))
                else:
                    out.append(ch)
            return "".join(out)
    ''',
        [
            "assert caesar_shift('abc', 1) == 'bcd'",
            "assert caesar_shift('xyz', 3) == 'abc'",
            "assert caesar_shift('hello, world', 0) == 'hello, world'",
            "assert caesar_shift('abc', -1) == 'zab'",
            "assert caesar_shift('a-z', 26) == 'a-z'",
            "assert caesar_shift('Ab', 2) == 'Ad'",
        ],
        "strings",
    ),
    program(
        "longest_common_prefix",
        '''
        def longest_common_prefix(words):
            """The longest string that starts every word ('' for no words)."""
            if not words:
                return ""
            prefix = words[0]
            for word in words[1:]:
                while not word.startswith(prefix):
                    prefix = prefix[:-1]
            return prefix
    ''',
        [
            "assert longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'",
            "assert longest_common_prefix(['dog', 'racecar', 'car']) == ''",
            "assert longest_common_prefix([]) == ''",
            "assert longest_common_prefix(['same', 'same']) == 'same'",
            "assert longest_common_prefix(['abc']) == 'abc'",
            "assert longest_common_prefix(['interview', 'internet', 'interval']) == 'inter'",
        ],
        "strings",
    ),
    program(
        "is_anagram",
        '''
        def is_anagram(a, b):
            """True if a and b use the same letters the same number of times (case-insensitive, spaces ignored)."""
            counts = {}
            for ch in a.lower().replace(" ", ""):
                counts[ch] = counts.get(ch, 0) + 1
            for ch in b.lower().replace(" ", ""):
                if counts.get(ch, 0) == 0:
                    return False
                counts[ch] -= 1
            return all(v == 0 for v in counts.values())
    ''',
        [
            "assert is_anagram('listen', 'silent')",
            "assert is_anagram('Dormitory', 'dirty room')",
            "assert not is_anagram('abc', 'abd')",
            "assert not is_anagram('aab', 'ab')",
            "assert not is_anagram('ab', 'aab')",
            "assert is_anagram('', '')",
        ],
        "strings",
    ),
    program(
        "snake_to_camel",
        '''
        def snake_to_camel(name):
            """'hello_big_world' -> 'helloBigWorld'."""
            parts = name.split("_")
            return parts[0] + "".join(p.capitalize() for p in parts[1:])
    ''',
        [
            "assert snake_to_camel('hello_big_world') == 'helloBigWorld'",
            "assert snake_to_camel('single') == 'single'",
            "assert snake_to_camel('a_b') == 'aB'",
            "assert snake_to_camel('') == ''",
            "assert snake_to_camel('get_http_response') == 'getHttpResponse'",
        ],
        "strings",
    ),
    program(
        "count_substring",
        '''
        def count_substring(text, sub):
            """How many times sub occurs in text, overlaps included."""
            if not sub:
                return 0
            count = 0
            for i in range(len(text) - len(sub) + 1):
                if text[i:i + len(sub)] == sub:
                    count += 1
            return count
    ''',
        [
            "assert count_substring('aaaa', 'aa') == 3",
            "assert count_substring('abcabc', 'abc') == 2",
            "assert count_substring('abc', 'd') == 0",
            "assert count_substring('abc', '') == 0",
            "assert count_substring('ab', 'abc') == 0",
            "assert count_substring('abab', 'b') == 2",
        ],
        "strings",
    ),
    program(
        "compress_spaces",
        '''
        def compress_spaces(text):
            """Collapse runs of spaces into one and strip spaces at both ends."""
            out = []
            previous_space = True
            for ch in text:
                if ch == " ":
                    if not previous_space:
                        out.append(ch)
                    previous_space = True
                else:
                    out.append(ch)
                    previous_space = False
            return "".join(out).rstrip(" ")
    ''',
        [
            "assert compress_spaces('  a   b  ') == 'a b'",
            "assert compress_spaces('abc') == 'abc'",
            "assert compress_spaces('') == ''",
            "assert compress_spaces('   ') == ''",
            "assert compress_spaces('x  y z') == 'x y z'",
        ],
        "strings",
    ),
    program(
        "first_unique_char",
        '''
        def first_unique_char(text):
            """Index of the first character that appears exactly once, or -1."""
            counts = {}
            for ch in text:
                counts[ch] = counts.get(ch, 0) + 1
            for i, ch in enumerate(text):
                if counts[ch] == 1:
                    return i
            return -1
    ''',
        [
            "assert first_unique_char('leetcode') == 0",
            "assert first_unique_char('loveleetcode') == 2",
            "assert first_unique_char('aabb') == -1",
            "assert first_unique_char('') == -1",
            "assert first_unique_char('aab') == 2",
        ],
        "strings",
    ),
]
