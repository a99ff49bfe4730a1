"""Corpus: small classes (the entry point is the class)."""

from marft_envs.tasks.code.corpus.program import program

PROGRAMS = [
    program(
        "Stack",
        '''
        class Stack:
            """A last-in, first-out stack."""

            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)

            def pop(self):
                if not self.items:
                    raise IndexError("pop from an empty stack")
                return self.items.pop()

            def peek(self):
                return self.items[-1] if self.items else None

            def __len__(self):
                return len(self.items)
    ''',
        [
            "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.pop() == 1",
            "s = Stack()\nassert len(s) == 0\ns.push('a')\nassert len(s) == 1",
            "s = Stack()\nassert s.peek() is None\ns.push(3)\nassert s.peek() == 3\nassert len(s) == 1",
            "s = Stack()\ntry:\n    s.pop()\n    raise AssertionError('no error')\nexcept IndexError:\n    pass",
        ],
        "classes",
    ),
    program(
        "Queue",
        '''
        class Queue:
            """A first-in, first-out queue built from two stacks."""

            def __init__(self):
                self.inbox = []
                self.outbox = []

            def enqueue(self, item):
                self.inbox.append(item)

            def dequeue(self):
                if not self.outbox:
                    while self.inbox:
                        self.outbox.append(self.inbox.pop())
                if not self.outbox:
                    raise IndexError("dequeue from an empty queue")
                return self.outbox.pop()

            def __len__(self):
                return len(self.inbox) + len(self.outbox)
    ''',
        [
            "q = Queue()\nq.enqueue(1)\nq.enqueue(2)\nassert q.dequeue() == 1\nassert q.dequeue() == 2",
            "q = Queue()\nq.enqueue(1)\nq.enqueue(2)\nq.dequeue()\nq.enqueue(3)\nassert [q.dequeue(), q.dequeue()] == [2, 3]",
            "q = Queue()\nassert len(q) == 0\nq.enqueue(5)\nq.enqueue(6)\nassert len(q) == 2",
            "q = Queue()\ntry:\n    q.dequeue()\n    raise AssertionError('no error')\nexcept IndexError:\n    pass",
        ],
        "classes",
    ),
    program(
        "BankAccount",
        '''
        class BankAccount:
            """A balance with deposits and withdrawals that may not overdraw it."""

            def __init__(self, balance=0):
                self.balance = balance

            def deposit(self, amount):
                if amount <= 0:
                    raise ValueError("deposit must be positive")
                self.balance += amount
                return self.balance

            def withdraw(self, amount):
                if amount > self.balance:
                    raise ValueError("insufficient funds")
                self.balance -= amount
                return self.balance
    ''',
        [
            "a = BankAccount(10)\nassert a.deposit(5) == 15",
            "a = BankAccount(10)\nassert a.withdraw(4) == 6",
            "a = BankAccount(10)\nassert a.withdraw(10) == 0",
            "a = BankAccount(5)\ntry:\n    a.withdraw(6)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass\nassert a.balance == 5",
            "a = BankAccount()\ntry:\n    a.deposit(0)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass",
            "assert BankAccount().balance == 0",
        ],
        "classes",
    ),
    program(
        "Counter",
        '''
        class Counter:
            """Counts hashable items; most_common(n) lists the n most frequent, ties by first seen."""

            def __init__(self):
                self.counts = {}

            def add(self, item, times=1):
                self.counts[item] = self.counts.get(item, 0) + times

            def count(self, item):
                return self.counts.get(item, 0)

            def most_common(self, n):
                ranked = sorted(self.counts.items(), key=lambda pair: -pair[1])
                return ranked[:n]
    ''',
        [
            "c = Counter()\nc.add('a')\nc.add('b')\nc.add('a')\nassert c.count('a') == 2\nassert c.count('z') == 0",
            "c = Counter()\nc.add('x', 3)\nc.add('y', 5)\nassert c.most_common(1) == [('y', 5)]",
            "c = Counter()\nc.add('p')\nc.add('q')\nassert c.most_common(2) == [('p', 1), ('q', 1)]",
            "c = Counter()\nassert c.most_common(3) == []",
        ],
        "classes",
    ),
    program(
        "Rectangle",
        '''
        class Rectangle:
            """An axis-aligned rectangle from (x, y) with a width and a height."""

            def __init__(self, x, y, width, height):
                self.x, self.y, self.width, self.height = x, y, width, height

            def area(self):
                return self.width * self.height

            def perimeter(self):
                return 2 * (self.width + self.height)

            def contains(self, px, py):
                return self.x <= px <= self.x + self.width and self.y <= py <= self.y + self.height

            def overlaps(self, other):
                return not (self.x + self.width < other.x or other.x + other.width < self.x
                            or self.y + self.height < other.y or other.y + other.height < self.y)
    ''',
        [
            "r = Rectangle(0, 0, 3, 4)\nassert r.area() == 12\nassert r.perimeter() == 14",
            "r = Rectangle(1, 1, 2, 2)\nassert r.contains(1, 1) and r.contains(3, 3) and not r.contains(4, 2)",
            "assert Rectangle(0, 0, 2, 2).overlaps(Rectangle(1, 1, 2, 2))",
            "assert not Rectangle(0, 0, 1, 1).overlaps(Rectangle(3, 3, 1, 1))",
            "assert Rectangle(0, 0, 1, 1).overlaps(Rectangle(1, 0, 1, 1))",
            "assert not Rectangle(0, 0, 1, 1).contains(0, 2)",
        ],
        "classes",
    ),
    program(
        "LRUCache",
        '''
        class LRUCache:
            """A key-value cache holding at most capacity entries; the least recently used goes first."""

            def __init__(self, capacity):
                self.capacity = capacity
                self.data = {}

            def get(self, key):
                if key not in self.data:
                    return None
                value = self.data.pop(key)
                self.data[key] = value
                return value

            def put(self, key, value):
                if key in self.data:
                    self.data.pop(key)
                elif len(self.data) >= self.capacity:
                    oldest = next(iter(self.data))
                    del self.data[oldest]
                self.data[key] = value
    ''',
        [
            "c = LRUCache(2)\nc.put('a', 1)\nc.put('b', 2)\nassert c.get('a') == 1",
            "c = LRUCache(2)\nc.put('a', 1)\nc.put('b', 2)\nc.put('c', 3)\nassert c.get('a') is None\nassert c.get('c') == 3",
            "c = LRUCache(2)\nc.put('a', 1)\nc.put('b', 2)\nc.get('a')\nc.put('c', 3)\nassert c.get('b') is None\nassert c.get('a') == 1",
            "c = LRUCache(1)\nc.put('a', 1)\nc.put('a', 5)\nassert c.get('a') == 5",
            "c = LRUCache(2)\nassert c.get('x') is None",
            "c = LRUCache(2)\nc.put('a', 1)\nc.put('a', 2)\nc.put('b', 3)\nassert c.get('a') == 2 and c.get('b') == 3",
        ],
        "classes",
    ),
    program(
        "Vector2",
        '''
        class Vector2:
            """A 2-D vector with addition, scaling, dot product and length."""

            def __init__(self, x, y):
                self.x, self.y = x, y

            def __add__(self, other):
                return Vector2(self.x + other.x, self.y + other.y)

            def __mul__(self, k):
                return Vector2(self.x * k, self.y * k)

            def dot(self, other):
                return self.x * other.x + self.y * other.y

            def length(self):
                return (self.x ** 2 + self.y ** 2) ** 0.5

            def __eq__(self, other):
                return (self.x, self.y) == (other.x, other.y)
    ''',
        [
            "assert Vector2(1, 2) + Vector2(3, 4) == Vector2(4, 6)",
            "assert Vector2(1, -2) * 3 == Vector2(3, -6)",
            "assert Vector2(1, 2).dot(Vector2(3, 4)) == 11",
            "assert Vector2(3, 4).length() == 5.0",
            "assert not Vector2(1, 2) == Vector2(2, 1)",
        ],
        "classes",
    ),
    program(
        "Temperature",
        '''
        class Temperature:
            """A temperature stored in Celsius, readable in Fahrenheit and Kelvin."""

            def __init__(self, celsius):
                if celsius < -273.15:
                    raise ValueError("below absolute zero")
                self.celsius = celsius

            @property
            def fahrenheit(self):
                return self.celsius * 9 / 5 + 32

            @property
            def kelvin(self):
                return self.celsius + 273.15

            @classmethod
            def from_fahrenheit(cls, f):
                return cls((f - 32) * 5 / 9)
    ''',
        [
            "assert Temperature(100).fahrenheit == 212.0",
            "assert Temperature(0).kelvin == 273.15",
            "assert Temperature.from_fahrenheit(32).celsius == 0.0",
            "assert Temperature(-40).fahrenheit == -40.0",
            "try:\n    Temperature(-300)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass",
            "assert Temperature(-273.15).kelvin == 0.0",
        ],
        "classes",
    ),
]
