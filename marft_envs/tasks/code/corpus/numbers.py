"""Corpus: arithmetic functions."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "gcd",
        '''
        def gcd(a, b):
            """Greatest common divisor of two non-negative integers (Euclid)."""
            while b:
                a, b = b, a % b
            return a
    ''',
        ["assert gcd(12, 18) == 6", "assert gcd(7, 5) == 1", "assert gcd(0, 9) == 9", "assert gcd(9, 0) == 9", "assert gcd(100, 75) == 25"],
        "numbers",
    ),
    program(
        "is_prime",
        '''
        def is_prime(n):
            """True for prime numbers."""
            if n < 2:
                return False
            d = 2
            while d * d <= n:
                if n % d == 0:
                    return False
                d += 1
            return True
    ''',
        [
            "assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]",
            "assert not is_prime(1)",
            "assert is_prime(2)",
            "assert not is_prime(25)",
            "assert is_prime(97)",
            "assert not is_prime(-7)",
        ],
        "numbers",
    ),
    program(
        "digit_sum",
        '''
        def digit_sum(n):
            """Sum of the decimal digits of the integer n (sign ignored)."""
            n = abs(n)
            total = 0
            while n > 0:
                total += n % 10
                n //= 10
            return total
    ''',
        [
            "assert digit_sum(123) == 6",
            "assert digit_sum(0) == 0",
            "assert digit_sum(-45) == 9",
            "assert digit_sum(1000) == 1",
            "assert digit_sum(99) == 18",
        ],
        "numbers",
    ),
    program(
        "fizzbuzz",
        '''
        def fizzbuzz(n):
            """The FizzBuzz words for 1..n."""
            out = []
            for i in range(1, n + 1):
                if i % 15 == 0:
                    out.append("FizzBuzz")
                elif i % 3 == 0:
                    out.append("Fizz")
                elif i % 5 == 0:
                    out.append("Buzz")
                else:
                    out.append(str(i))
            return out
    ''',
        [
            "assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']",
            "assert fizzbuzz(0) == []",
            "assert fizzbuzz(15)[-1] == 'FizzBuzz'",
            "assert fizzbuzz(3) == ['1', '2', 'Fizz']",
            "assert len(fizzbuzz(16)) == 16",
        ],
        "numbers",
    ),
    program(
        "to_binary",
        '''
        def to_binary(n):
            """Binary digits of a non-negative integer, as a string."""
            if n == 0:
                return "0"
            digits = []
            while n > 0:
                digits.append(str(n % 2))
                n //= 2
            return "".join(reversed(digits))
    ''',
        [
            "assert to_binary(0) == '0'",
            "assert to_binary(1) == '1'",
            "assert to_binary(5) == '101'",
            "assert to_binary(8) == '1000'",
            "assert to_binary(255) == '11111111'",
        ],
        "numbers",
    ),
    program(
        "from_roman",
        '''
        def from_roman(numeral):
            """The integer value of a Roman numeral."""
            values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
            total = 0
            for i, ch in enumerate(numeral):
                v = values[ch]
                if i + 1 < len(numeral) and values[numeral[i + 1]] > v:
                    total -= v
                else:
                    total += v
            return total
    ''',
        [
            "assert from_roman('III') == 3",
            "assert from_roman('IV') == 4",
            "assert from_roman('IX') == 9",
            "assert from_roman('LVIII') == 58",
            "assert from_roman('MCMXCIV') == 1994",
            "assert from_roman('') == 0",
        ],
        "numbers",
    ),
    program(
        "integer_sqrt",
        '''
        def integer_sqrt(n):
            """The largest integer r with r * r <= n (binary search)."""
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if mid * mid <= n:
                    lo = mid
                else:
                    hi = mid - 1
            return lo
    ''',
        [
            "assert integer_sqrt(0) == 0",
            "assert integer_sqrt(1) == 1",
            "assert integer_sqrt(15) == 3",
            "assert integer_sqrt(16) == 4",
            "assert integer_sqrt(17) == 4",
            "assert integer_sqrt(1000000) == 1000",
        ],
        "numbers",
    ),
    program(
        "collatz_steps",
        '''
        def collatz_steps(n):
            """Steps for n to reach 1 under the Collatz map."""
            steps = 0
            while n != 1:
                if n % 2 == 0:
                    n = n // 2
                else:
                    n = 3 * n + 1
                steps += 1
            return steps
    ''',
        [
            "assert collatz_steps(1) == 0",
            "assert collatz_steps(2) == 1",
            "assert collatz_steps(6) == 8",
            "assert collatz_steps(7) == 16",
            "assert collatz_steps(27) == 111",
        ],
        "numbers",
    ),
    program(
        "mean_and_range",
        '''
        def mean_and_range(values):
            """(mean, max - min) of a non-empty list."""
            total = 0
            low = high = values[0]
            for v in values:
                total += v
                if v < low:
                    low = v
                if v > high:
                    high = v
            return total / len(values), high - low
    ''',
        [
            "assert mean_and_range([1, 2, 3]) == (2.0, 2)",
            "assert mean_and_range([5]) == (5.0, 0)",
            "assert mean_and_range([-1, 1]) == (0.0, 2)",
            "assert mean_and_range([4, 8, 6, 2]) == (5.0, 6)",
        ],
        "numbers",
    ),
    program(
        "clamp",
        '''
        def clamp(x, low, high):
            """x limited to the interval [low, high]."""
            if x < low:
                return low
            if x > high:
                return high
            return x
    ''',
        [
            "assert clamp(5, 0, 10) == 5",
            "assert clamp(-3, 0, 10) == 0",
            "assert clamp(12, 0, 10) == 10",
            "assert clamp(0, 0, 10) == 0",
            "assert clamp(10, 0, 10) == 10",
            "assert clamp(2.5, 1, 2) == 2",
        ],
        "numbers",
    ),
    program(
        "count_divisors",
        '''
        def count_divisors(n):
            """Number of positive divisors of a positive integer."""
            count = 0
            d = 1
            while d * d <= n:
                if n % d == 0:
                    count += 1 if d * d == n else 2
                d += 1
            return count
    ''',
        [
            "assert count_divisors(1) == 1",
            "assert count_divisors(12) == 6",
            "assert count_divisors(16) == 5",
            "assert count_divisors(13) == 2",
            "assert count_divisors(36) == 9",
        ],
        "numbers",
    ),
    program(
        "compound_interest",
        '''
        def compound_interest(principal, rate_percent, years):
            """Balance after compounding yearly, rounded to cents."""
            balance = principal
            for _ in range(years):
                balance = balance * (1 + rate_percent / 100)
            return round(balance, 2)
    ''',
        [
            "assert compound_interest(100, 10, 2) == 121.0",
            "assert compound_interest(100, 0, 5) == 100",
            "assert compound_interest(50, 10, 0) == 50",
            "assert compound_interest(1000, 5, 1) == 1050.0",
            "assert compound_interest(200, 50, 3) == 675.0",
        ],
        "numbers",
    ),
]
