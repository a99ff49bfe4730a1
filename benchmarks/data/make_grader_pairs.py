r"""Build `grader_pairs.jsonl`: hand-labelled (pred, gold, label, category) pairs for the MATH grader.

    .venv/bin/python benchmarks/data/make_grader_pairs.py

Every label below was decided by hand from the mathematics (and, where a convention decides, from the
conventions documented in `marft_envs/rewards/math.py`, noted per table); no grader is run here.
The templated tables produce labels that are correct by construction (p/q vs its own decimal is True;
p/q vs q/p with p != q is False, ...). The `math500_style` table uses real MATH-500 gold answers
(copied in, so nothing here reads the dataset) with predictions written by hand. The `hard` table
holds true equivalences that a string-and-numbers grader can plausibly miss; it keeps the set honest.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

OUT = Path(__file__).with_name("grader_pairs.jsonl")

T, F = True, False


def fractions_and_decimals():
    rows = []
    # (p, q, terminating decimal or None, a wrong decimal that looks close)
    for p, q in [(1, 2), (3, 4), (2, 5), (7, 8), (3, 20), (17, 50), (9, 16), (11, 25), (5, 2), (13, 4)]:
        dec = _terminating_decimal(p, q)
        rows += [
            (rf"\frac{{{p}}}{{{q}}}", f"{p}/{q}", T),
            (rf"\dfrac{{{p}}}{{{q}}}", rf"\frac{{{p}}}{{{q}}}", T),
            (dec, rf"\frac{{{p}}}{{{q}}}", T),
            (rf"\frac{{{q}}}{{{p}}}", rf"\frac{{{p}}}{{{q}}}", F),
            (rf"\frac{{{p}}}{{{q + 1}}}", rf"\frac{{{p}}}{{{q}}}", F),
        ]
    for p, q, approx in [(1, 3, "0.33"), (2, 3, "0.667"), (1, 7, "0.142857"), (5, 6, "0.8333"), (4, 9, "0.44")]:
        rows += [
            (rf"\frac{{{2 * p}}}{{{2 * q}}}", rf"\frac{{{p}}}{{{q}}}", T),  # unreduced form
            (approx, rf"\frac{{{p}}}{{{q}}}", F),  # a rounded decimal is not the fraction
            (rf"-\frac{{{p}}}{{{q}}}", rf"\frac{{-{p}}}{{{q}}}", T),
            (rf"\frac{{{p}}}{{{q}}}", rf"-\frac{{{p}}}{{{q}}}", F),
        ]
    rows += [
        (r"\frac12", "0.5", T), (r"\frac43", r"\frac{4}{3}", T), (r"\frac 59", r"\frac{5}{9}", T),
        (r"\frac9{19}", r"\frac{9}{19}", T), (r"\frac{270}7", r"\frac{270}{7}", T),
        (r"\tfrac{3}{2}", "1.5", T), (".5", "0.5", T), ("0.50", r"\frac{1}{2}", T),
        ("3.0", "3", T), ("2.9999", "3", F), (r"\frac{1}{2}", "0.05", F), ("1.25", r"\frac54", T),
        ("1.52", "1.25", F), (r"\frac{12}{5}", "2.4", T), ("0.15", r"\frac{3}{20}", T), ("0.015", "0.15", F),
        (r"1\frac{4}{5}", r"\frac{9}{5}", T), (r"1\frac{4}{5}", r"\frac{4}{5}", F),
        (r"137 \frac{1}{2}", "137.5", T), (r"2\frac{1}{3}", r"\frac{7}{3}", T), (r"2\frac{1}{3}", r"\frac{2}{3}", F),
    ]
    return rows


def _terminating_decimal(p: int, q: int) -> str:
    value, scale = Fraction(p, q), 1
    while (value * scale).denominator != 1:
        scale *= 10
    digits = len(str(scale)) - 1
    whole = value * scale
    text = str(whole.numerator).rjust(digits + 1, "0")
    return f"{text[:-digits]}.{text[-digits:]}" if digits else text


def radicals():
    return [
        (r"2\sqrt{2}", r"\sqrt{8}", T), (r"2\sqrt{2}", r"\sqrt{6}", F), (r"\sqrt{8}", r"2\sqrt2", T),
        (r"3\sqrt{13}", r"\sqrt{117}", T), (r"3\sqrt{13}", r"13\sqrt{3}", F), (r"\sqrt{12}", r"2\sqrt{3}", T),
        (r"\sqrt{12}", r"3\sqrt{2}", F), (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}", T),
        (r"\frac{\sqrt{3}}{3}", r"\frac{\sqrt{3}}{2}", F), (r"\frac{\sqrt{3}}{3}", "0.577", F),
        (r"\sqrt{2}", "1.41421356", F), (r"11\sqrt2", r"\sqrt{242}", T), (r"11\sqrt2", r"11\sqrt{3}", F),
        (r"\sqrt[3]{27}", "3", T), (r"\sqrt[3]{16}", r"2\sqrt[3]{2}", T), (r"\sqrt[3]{16}", r"2\sqrt{2}", F),
        (r"\frac{3\sqrt{3}}{4}", r"\frac{3}{4}\sqrt{3}", T), (r"\frac{3\sqrt{3}}{4}", r"\frac{3\sqrt{3}}{2}", F),
        (r"\sqrt{4}", "2", T), (r"\sqrt{\frac{9}{4}}", r"\frac32", T), (r"1+2\sqrt{3}", r"2\sqrt{3}+1", T),
        (r"1+2\sqrt{3}", r"1+3\sqrt{2}", F), (r"\frac{\sqrt{21}}{5}", r"\sqrt{\frac{21}{25}}", T),
        (r"\frac{\sqrt{21}}{5}", r"\frac{21}{5}", F), (r"2^{1/2}", r"\sqrt{2}", T), (r"\sqrt{2}+\sqrt{3}", r"\sqrt{5}", F),
        (r"\frac{1}{\sqrt{2}-1}", r"\sqrt{2}+1", T), (r"\sqrt{53}", r"\sqrt{35}", F),
    ]


def pi_forms():
    return [
        (r"2\pi", r"\pi\cdot 2", T), (r"2\pi", r"\pi^2", F), (r"\frac{\pi}{2}", r"\frac12\pi", T),
        (r"\frac{\pi}{2}", r"\frac{2}{\pi}", F), (r"288\pi", r"288 \pi", T), (r"288\pi", "288", F),
        (r"\pi", "3.14", F), (r"\pi", "3.14159", F), (r"-\frac{\pi}{6}", r"-\pi/6", T),
        (r"-\frac{\pi}{6}", r"\frac{\pi}{6}", F), (r"18+2\pi", r"2\pi+18", T), (r"18+2\pi", r"20\pi", F),
        (r"\frac{20000}{\pi}", r"20000/\pi", T), (r"\frac{20000}{\pi}", r"20000\pi", F),
        (r"7\pi", r"\frac{14\pi}{2}", T), (r"12\pi", r"12 \cdot \pi", T), (r"12\pi", r"6\pi", F),
        (r"\frac{\pi^2}{8}", r"\frac{1}{8}\pi^2", T), (r"\frac{5 \pi^2}{4}", r"\frac{5\pi}{4}", F),
        (r"\frac{16\pi}{3}", r"5\frac{1}{3}\pi", T), (r"4\pi - 8", r"4(\pi-2)", T), (r"4\pi - 8", r"4\pi-2", F),
    ]


def degrees():  # convention: degree marks are dropped, never converted to radians
    return [
        (r"30^\circ", "30", T), (r"30^{\circ}", r"30^\circ", T), ("30", r"30^\circ", T), (r"30^\circ", "60", F),
        (r"90^\circ", "90", T), (r"90^\circ", "180", F), (r"145^\circ", "145", T), (r"145^\circ", "135", F),
        (r"120 \text{ degrees}", r"120^\circ", T), (r"120^{\circ}", "120", T), (r"76^\circ", "67", F),
        (r"\frac{270}{7}^\circ", r"\frac{270}7\text{ degrees}", T), (r"36^\circ", "36", T), (r"36^\circ", "3.6", F),
        ("75°", r"75^\circ", T), (r"106^\circ", "104", F),
    ]


def units_and_text():
    return [
        (r"5\text{ cm}", "5", T), (r"5\text{ cm}", "6", F), (r"5 \text{ cm}", r"5\text{cm}", T),
        (r"864 \mbox{ inches}^2", "864", T), ("864", r"864 \mbox{ inches}^2", T), ("846", r"864 \mbox{ inches}^2", F),
        (r"15\mbox{ cm}^2", "15", T), (r"15\text{ cm}^2", "15", T), (r"15\text{ cm}^2", "225", F),
        (r"5.4 \text{ cents}", "5.4", T), (r"5.4 \text{ cents}", "54", F), (r"5.4\ \text{cents}", r"\frac{27}{5}", T),
        ("12 units", "12", T), ("12 meters", "12", T), ("12 feet", "13", F), (r"40 \text{ mph}", "40", T),
        (r"\text{ 17 }", "17", T), (r"3 \text{ hours}", "3", T), (r"3\text{ hours}", "4", F),
        (r"1250 \text{ dollars}", "1250", T), (r"\frac{1}{2}\text{ inch}", "0.5", T), (r"\frac{1}{2}\text{ inch}", "2", F),
    ]


def thousands():  # `1,234` may be a number; `,\!` and `{,}` always are; `1,2` never is
    return [
        (r"10,\!080", "10080", T), (r"10{,}080", "10080", T), ("10,080", "10080", T), (r"10,\!080", "10800", F),
        (r"11,\! 111,\! 111,\! 100", "11111111100", T), ("11,111,111,100", "11111111100", T),
        (r"11,\! 111,\! 111,\! 100", "1111111100", F), ("58,500", "58500", T), ("58500", "58,500", T),
        ("58,500", "5850", F), (r"\$32,\!348", "32348", T), ("32,348", r"\$32,\!348", T), ("32,438", "32348", F),
        ("1,2", "12", F), ("12", "1,2", F), ("1,000,000", "1000000", T), ("1,000,000", "100000", F),
        (r"1{,}000", "1000", T), ("2,220", "2220", T), ("2,220", "222", F), ("27,648", "27648", T),
        ("1,2", "1, 2", T), ("3, 5, 7", "357", F),
    ]


def tuples_and_intervals():  # brackets are read literally
    return [
        ("(1,2]", "(1,2)", F), ("(1,2)", "(1,2)", T), ("(1, 2)", r"\left(1,2\right)", T), ("[1,2]", "(1,2)", F),
        ("[1,2)", "[1,2)", T), ("[1,2)", "(1,2]", F), ("(2,1)", "(1,2)", F), (r"(2,\infty)", r"(2, \infty)", T),
        (r"(2,\infty)", r"[2,\infty)", F), (r"(-\infty, 0]", r"(-\infty,0]", T), (r"(-\infty, 0]", r"(-\infty, 0)", F),
        (r"(-\infty, 0]", r"(0, \infty)", F), (r"(3,4]", r"\left(3,4\right]", T), (r"(3,4]", "[3,4]", F),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})", T), (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi)", F),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(\frac{\pi}{2}, 3)", F), ("(6,31,-1)", "(6, 31, -1)", T),
        ("(6,31,-1)", "(6,31,1)", F), ("(6,31,-1)", "(6,31)", F), (r"(15,-29)", r"\left(15, -29\right)", T),
        ("(15,-29)", "(-29,15)", F), (r"\left( \frac{3}{2}, -13 \right)", "(1.5, -13)", T),
        (r"\left( \frac{3}{2}, -13 \right)", "(1.5, 13)", F), ("(1,-16,-4,43)", r"(1, -16, -4, 43)", T),
        ("(1,-16,-4,43)", "(1,-16,-43,4)", F), (r"\left(\frac{3}{5},\frac{8}{3}\right]", "(0.6, 8/3]", T),
        (r"\left(\frac{3}{5},\frac{8}{3}\right]", r"\left[\frac{3}{5},\frac{8}{3}\right]", F),
        (r"(-\sqrt{3}, \sqrt{3})", r"(-\sqrt3,\sqrt3)", T), (r"(-\sqrt{3}, \sqrt{3})", r"[-\sqrt{3}, \sqrt{3}]", F),
        (r"(0,9) \cup (9,36)", r"(9,36)\cup(0,9)", T), (r"(0,9) \cup (9,36)", "(0,36)", F),
        (r"(-\infty, 2) \cup (3, \infty)", r"(-\infty,2)\cup(3,\infty)", T),
        (r"(-\infty, 2) \cup (3, \infty)", r"(-\infty,2]\cup[3,\infty)", F), (r"x \in [-2,7]", "[-2,7]", T),
        (r"x \in [-2,7]", "[-2,7)", F), (r"\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]", r"[\pi^2/8, 5\pi^2/4]", T),
        ("(8,-2)", "(8, -2)", T), ("(8,-2)", "(-8,2)", F),
    ]


def sets_and_lists():
    return [
        ("1, 2", "2, 1", T), ("1, 2", "1, 3", F), (r"\{1,2\}", r"\{2,1\}", T), (r"\{1,2\}", r"\{1,2,3\}", F),
        ("1,-2", "-2,1", T), ("1,-2", "1,2", F), ("-2, 1", "1,-2", T), ("3, 5, 7", "7, 5, 3", T),
        ("3, 5, 7", "3, 5", F), ("3, 5, 7", "3, 5, 7, 9", F), (r"\{3,5,7\}", "3,5,7", T),
        (r"1 \pm \sqrt{19}", r"1+\sqrt{19}, 1-\sqrt{19}", T), (r"1 \pm \sqrt{19}", r"1+\sqrt{19}", F),
        (r"1-\sqrt{19}, 1+\sqrt{19}", r"1 \pm \sqrt{19}", T), (r"3 \pm 2 \sqrt{2}", r"3+2\sqrt2,3-2\sqrt2", T),
        (r"3 \pm 2 \sqrt{2}", r"3 \pm \sqrt{2}", F), (r"\{1\pm\sqrt{5},-2\}", r"-2, 1+\sqrt5, 1-\sqrt5", T),
        (r"\{1\pm\sqrt{5},-2\}", r"1+\sqrt5, 1-\sqrt5", F), (r"\frac{3 \pm \sqrt{5}}{2}", r"\frac{3+\sqrt5}2,\frac{3-\sqrt5}2", T),
        (r"\{5\}", "5", T), (r"\{5\}", "6", F), ("0, 1", r"\{0, 1\}", T),
        ("-1, 1", r"\pm 1", T), ("-1, 1", "1", F), ("x = 1, 2", "1, 2", T), ("x=1, x=2", "2, 1", T),
        (r"1 \text{ and } 2", "1, 2", T), (r"2 \text{ or } -3", "-3, 2", T), (r"2 \text{ or } -3", "-3, -2", F),
        (r"\frac12, \frac13", r"0.5, \frac{1}{3}", T),
    ]


def complex_numbers():
    return [
        ("1+2i", "2i+1", T), ("1+2i", "1-2i", F), ("6 - 5i", "-5i+6", T), ("6 - 5i", "6+5i", F),
        ("6+9i", "6 + 9i", T), ("6+9i", "9+6i", F), ("-2 + 7i", "7i - 2", T), ("-2 + 7i", "2 - 7i", F),
        ("1+274i", "274i + 1", T), ("1+274i", "1+247i", F), ("1 - 12i", "1-12i", T), ("1 - 12i", "-12i", F),
        ("i", r"\sqrt{-1}", T), ("2i", "2", F), ("(1+i)^2", "2i", T), (r"\frac{1}{i}", "-i", T),
        (r"\frac{1+i}{2}", r"\frac12+\frac12 i", T), (r"\frac{1+i}{2}", r"\frac12-\frac12 i", F),
        ("1+2i", "1+2", F),
    ]


def expressions():
    return [
        ("x^2+2x+1", "(x+1)^2", T), ("x^2+2x+1", "(x-1)^2", F), ("x^2-1", "(x-1)(x+1)", T), ("x^2-1", "(x-1)^2", F),
        ("p - q", "-q+p", T), ("p - q", "q - p", F), ("2k+2", "2(k+1)", T), ("2k+2", "2k+1", F),
        ("(a+5)(b+2)", "ab+2a+5b+10", T), ("(a+5)(b+2)", "(a+2)(b+5)", F), ("x^3+3x-6", "3x+x^3-6", T),
        ("x^3+3x-6", "x^3-3x+6", F), ("x^5 - x^4 + x^3 - x^2 + x - 1", r"\frac{x^6-1}{x+1}", T),
        ("x^5 - x^4 + x^3 - x^2 + x - 1", "x^5+x^4+x^3+x^2+x+1", F), ("-13x+3", "3-13x", T), ("-13x+3", "13x+3", F),
        (r"\frac{11+9a}{20}", r"\frac{11}{20}+\frac{9a}{20}", T), (r"\frac{11+9a}{20}", r"\frac{11+9a}{2}", F),
        ("6r^2-4r-24", "2(3r^2-2r-12)", T), ("6r^2-4r-24", "6r^2-4r+24", F), ("5r^5", "5 r^{5}", T), ("5r^5", "5r^4", F),
        ("3R^2", "3 R^2", T), ("3R^2", "9R^2", F), ("15x - 80", "5(3x-16)", T), ("15x - 80", "15x-8", F),
        ("8n^2 + 4n + 1", "4n(2n+1)+1", T), ("8n^2 + 4n + 1", "8n^2+4n", F), (r"\cot x", r"\frac{\cos x}{\sin x}", T),
        (r"\cot x", r"\tan x", F), ("x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1", r"\frac{x^9-1}{x-1}", T),
        ("2k", "k+k", T), ("2k", "k^2", F), (r"\frac{x}{2}", "0.5x", T), (r"\frac{x}{3}", "0.33x", F),
        ("2^{10}", "1024", T), ("2^{10}", "1000", F), (r"\frac{a}{b}", r"\frac{b}{a}", F),
    ]


def equations():
    return [
        ("x=5", "5", T), ("5", "x=5", T), ("x=5", "6", F), ("y = 2x+1", "2x+1", T), ("y = 2x+1", "2x-1", F),
        ("y = 2x + 3", "y=2x+3", T), ("y = 2x + 3", "2x - y + 3 = 0", T), ("y = 2x + 3", "y = 3x + 2", F),
        ("y = -2x", "2x + y = 0", T), ("y = -2x", "y = 2x", F), ("x = 5", "x=5", T), ("x=5", "y=5", F),
        ("5x - 7y + 11z + 4 = 0", "-5x+7y-11z-4=0", T), ("5x - 7y + 11z + 4 = 0", "10x-14y+22z+8=0", T),
        ("5x - 7y + 11z + 4 = 0", "5x-7y+11z-4=0", F), ("5x - 7y + 11z + 4 = 0", "5x - 7y + 11z = -4", T),
        (r"k = \frac{1}{2}", "0.5", T), (r"k = \frac{1}{2}", "2", F), (r"f(x) = x^2+1", "x^2+1", T),
        (r"a = 3", "a=4", F), (r"x = \frac{1}{2} = 0.5", r"\frac12", T), (r"n = 10", "10", T), (r"n = 10", "11", F),
        ("2x+3=y", "y = 2x+3", T), ("y = 2x+3", "2x+3", T),
    ]


def matrices():
    m = r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"
    return [
        (m, m, T), (m, r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", T), (m, r"\begin{bmatrix}1&2\\3&4\end{bmatrix}", T),
        (m, r"\begin{pmatrix}1&2\\3&5\end{pmatrix}", F), (m, r"\begin{pmatrix}1&3\\2&4\end{pmatrix}", F),
        (m, r"\begin{pmatrix}1&2&3\\4&5&6\end{pmatrix}", F),
        (r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}", r"\begin{pmatrix} -\frac13 \\ \frac23 \\ \frac53 \end{pmatrix}", T),
        (r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}", r"\begin{pmatrix} 1/3 \\ 2/3 \\ 5/3 \end{pmatrix}", F),
        (r"\begin{pmatrix} -2 \\ -14 \\ -7 \end{pmatrix}", r"\begin{pmatrix}-2\\-14\\-7\end{pmatrix}", T),
        (r"\begin{pmatrix} -2 \\ -14 \\ -7 \end{pmatrix}", r"\begin{pmatrix}-2\\-7\\-14\end{pmatrix}", F),
        (r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}", r"\begin{pmatrix}-1&0\\0&-1\end{pmatrix}", T),
        (r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}", r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", F),
        (r"\begin{pmatrix} 16/49 \\ 48/49 \\ 24/49 \end{pmatrix}", r"\begin{pmatrix} \frac{16}{49} \\ \frac{48}{49} \\ \frac{24}{49} \end{pmatrix}", T),
        (r"\begin{pmatrix} 16/49 \\ 48/49 \\ 24/49 \end{pmatrix}", r"\begin{pmatrix} 16 \\ 48 \\ 24 \end{pmatrix}", F),
        (r"\begin{pmatrix} 1/5 \\ -18/5 \end{pmatrix}", r"\begin{pmatrix} 0.2 \\ -3.6 \end{pmatrix}", T),
        (r"\begin{pmatrix} 1/5 \\ -18/5 \end{pmatrix}", r"\begin{pmatrix} 1/5 \\ 18/5 \end{pmatrix}", F),
    ]


def bases():  # only the same digits in the same base match
    return [
        ("52_8", "52_{8}", T), ("52_8", "52", F), ("52", "52_8", F), ("101_2", "5", F), ("101_2", "101_{2}", T),
        ("40_9", "40_{9}", T), ("40_9", "36", F), ("40_9", "40_8", F), ("2516_8", "2516_{8}", T), ("2516_8", "2561_8", F),
        ("4210_{5}", "4210_5", T), ("4210_{5}", "4210", F), ("204_5", "204_{5}", T), ("204_5", "204_6", F),
        ("4343_6", "4343_{6}", T), ("4343_6", "4334_6", F), (r"10_{2}", "10_2", T), ("11_2", "3", F),
        ("0052_8", "52_8", T),
    ]


def repeating_decimals():
    return [
        (r"0.\overline{3}", "1/3", T), (r"0.\overline{3}", r"\frac{1}{3}", T), (r"0.1\overline{6}", r"\frac{1}{6}", T),
        (r"0.\overline{3}", "0.3", F), (r"0.\overline{3}", "0.33", F), (r"0.1\overline{6}", "0.16", F),
        (r"0.\overline{27}", r"\frac{3}{11}", T), (r"0.\overline{27}", r"\frac{27}{100}", F), (r"1.\overline{6}", r"\frac53", T),
        (r"0.\overline{142857}", r"\frac17", T), (r"0.\overline{9}", "1", T), (r"0.\overline{12}", r"\frac{4}{33}", T),
        (r"0.\overline{12}", r"\frac{12}{100}", F), (r"2.\overline{3}", r"\frac{7}{3}", T), (r"0.0\overline{5}", r"\frac{1}{18}", T),
        (r"0.0\overline{5}", r"\frac{1}{20}", F),
    ]


def percent():  # convention: `n\%` reads as n or as n/100 (50\% == 50 == ... and 50\% == 0.5)
    return [
        (r"50\%", "50", T), ("50", r"50\%", T), (r"50\%", "40", F), (r"12.5\%", "12.5", T), (r"12.5\%", "1.25", F),
        ("25%", "25", T), (r"25\%", "0.25", T), (r"25\%", "2.5", F), (r"33\frac{1}{3}\%", r"\frac{100}{3}", T), (r"10\%", "100", F), (r"10\%", "0.1", T),
    ]


def formatting():  # signs, punctuation and LaTeX spacing that never change a value
    return [
        ("-5", "- 5", T), ("-5", "5", F), ("+5", "5", T), ("+5", "-5", F), ("5.", "5", T), ("5.", "6", F),
        ("$5$", "5", T), (r"\$5", "5", T), (r"\$18.90", "18.9", T), (r"\$18.90", "18.09", F), (r"\$36", "36", T),
        (r"\left( 1 \right)", "1", T), (r"\left(\frac{1}{2}\right)", "0.5", T), (r"4\!", "4", T), (r"4\,", "4", T),
        ("~4", "4", T), (r"\displaystyle\frac{1}{2}", r"\frac12", T), (r"\boxed{7}", "7", T), (r"\boxed{7}", "8", F),
        ("-50", "-50", T), ("-50", "50", F), ("-\\frac{35}{9}", "-35/9", T), ("-\\frac{35}{9}", "35/9", F),
        ("  42  ", "42", T), (r"\dfrac{17}{50}", "0.34", T), (r"\dfrac{17}{50}", "0.17", F), ("−3", "-3", T),
        (r"\$32,\!348", "32,348", T), (".0000672", r"6.72\times10^{-5}", T), (".0000672", r"6.72 \cdot 10^{-4}", F),
        ("0", "-0", T), ("0", "0.0", T),
    ]


def text_answers():
    return [
        (r"\text{(A)}", "A", T), (r"\text{(A)}", "(A)", T), (r"\text{(A)}", "B", F), (r"\text{(C)}", r"\textbf{(C)}", T),
        (r"\text{(C)}", r"\text{(D)}", F), ("(E)", r"\text{(E)}", T), ("E", r"\text{(E)}", T), (r"\text{(B)}", "(D)", F),
        (r"\text{Evelyn}", "Evelyn", T), (r"\text{Evelyn}", r"\text{evelyn}", T), (r"\text{Evelyn}", r"\text{Navin}", F),
        (r"\text{east}", "east", T), (r"\text{east}", r"\text{west}", F), (r"\text{even}", r"\text{Even}", T),
        (r"\text{even}", r"\text{odd}", F), (r"\text{ellipse}", r"\text{ellipse}", T), (r"\text{ellipse}", r"\text{parabola}", F),
        (r"\text{Navin}", r"\textbf{Navin}", T), (r"\text{(C)}", "C", T), (r"\text{neither}", r"\text{odd}", F),
    ]


def integers():
    return [
        ("42", "42", T), ("42", "24", F), ("0", "0", T), ("0", "1", F), ("13535", "13535", T), ("13535", "13553", F),
        ("-125", "-125", T), ("-125", "125", F), ("9901", "9901.0", T), ("007", "7", T),
        ("1000000", "10^6", T), ("1000000", "10^5", F), ("256", "2^8", T), ("256", "2^7", F), ("6!", "720", T),
        ("5!", "720", F), (r"\binom{5}{2}", "10", T), (r"\binom{5}{2}", "20", F),
    ]


def math500_style():
    """Real MATH-500 gold answers, with predictions written by hand."""
    return [
        (r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", T), (r"(3, \frac{\pi}{3})", r"\left( 3, \frac{\pi}{2} \right)", F),
        (r"\frac{14}{3}", r"\frac{14}{3}", T), (r"4\frac{2}{3}", r"\frac{14}{3}", T), ("4.67", r"\frac{14}{3}", F),
        (r"\frac{3}{56}", r"\frac{3}{56}", T), (r"\frac{6}{112}", r"\frac{3}{56}", T), (r"\frac{3}{65}", r"\frac{3}{56}", F),
        (r"\sqrt{51}", r"\sqrt{51}", T), (r"\sqrt{50}", r"\sqrt{51}", F), (r"\frac{243}{625}", r"\frac{243}{625}", T),
        ("0.3888", r"\frac{243}{625}", T), ("0.389", r"\frac{243}{625}", F), (r"70\sqrt2", r"70 \sqrt{2}", T),
        (r"\sqrt{9800}", r"70 \sqrt{2}", T), (r"70\sqrt3", r"70 \sqrt{2}", F), (r"x^5-x^4+x^3-x^2+x-1", "x^5 - x^4 + x^3 - x^2 + x - 1", T),
        (r"\frac{35}{64}", r"\frac{35}{64}", T), (r"0.546875", r"\frac{35}{64}", T), (r"0.55", r"\frac{35}{64}", F),
        (r"\frac{11}{36}", r"\frac{11}{36}", T), (r"\frac{11}{63}", r"\frac{11}{36}", F), ("(-2,1)", "(-2,1)", T),
        ("(1,-2)", "(-2,1)", F), (r"\frac{448}{15625}", r"\frac{448}{15625}", T), ("0.028672", r"\frac{448}{15625}", T),
        (r"\frac{448}{15265}", r"\frac{448}{15625}", F), (r"(a+5)(b+2)", "(a+5)(b+2)", T), ("(b+2)(a+5)", "(a+5)(b+2)", T),
        (r"\frac{3840}{289}", r"\frac{3840}{289}", T), (r"13\frac{83}{289}", r"\frac{3840}{289}", T), ("13.29", r"\frac{3840}{289}", F),
        (r"\frac{2}{21}", r"\frac{2}{21}", T), (r"\frac{21}{2}", r"\frac{2}{21}", F), (r"2\sqrt{113}", r"2\sqrt{113}", T),
        (r"\sqrt{452}", r"2\sqrt{113}", T), (r"4\sqrt{113}", r"2\sqrt{113}", F), (r"\frac65", r"\frac65", T), ("1.2", r"\frac65", T),
        ("3.21", "3.21", T), (r"\frac{321}{100}", "3.21", T), ("3.12", "3.21", F), (r"\frac{17}{50}", r"\dfrac{17}{50}", T),
        (r"\frac{13}{15}", r"\frac{13}{15}", T), (r"0.8\overline{6}", r"\frac{13}{15}", T), (r"0.86", r"\frac{13}{15}", F),
        (r"\frac{13}{18}", r"\frac{13}{18}", T), (r"\frac{26}{36}", r"\frac{13}{18}", T), (r"\frac{13}{8}", r"\frac{13}{18}", F),
        (r"\frac{1997}{2}", r"\frac{1997}{2}", T), ("998.5", r"\frac{1997}{2}", T), ("998", r"\frac{1997}{2}", F),
        (r"-\frac{24}{25}", r"-\frac{24}{25}", T), ("-0.96", r"-\frac{24}{25}", T), ("0.96", r"-\frac{24}{25}", F),
        (r"\frac{639}{40}", r"\frac{639}{40}", T), ("15.975", r"\frac{639}{40}", T), ("15.97", r"\frac{639}{40}", F),
        (r"\frac{2}{1005}", r"\frac{2}{1005}", T), (r"\frac{4}{2010}", r"\frac{2}{1005}", T), (r"\frac{1}{1005}", r"\frac{2}{1005}", F),
        (r"11\sqrt{5}+11", r"11 \sqrt{5} + 11", T), (r"11(\sqrt5+1)", r"11 \sqrt{5} + 11", T), (r"11\sqrt{5}-11", r"11 \sqrt{5} + 11", F),
        (r"16\sqrt3", r"16 \sqrt{3}", T), (r"\sqrt{768}", r"16 \sqrt{3}", T), (r"16\sqrt2", r"16 \sqrt{3}", F),
        (r"\frac{5}{13}", r"\frac{5}{13}", T), (r"\frac{10}{26}", r"\frac{5}{13}", T), (r"\frac{12}{13}", r"\frac{5}{13}", F),
        (r"\frac{7}{2}", r"\frac{7}{2}", T), ("3.5", r"\frac{7}{2}", T), (r"3\frac12", r"\frac{7}{2}", T), ("7", r"\frac{7}{2}", F),
        ("(2,12) \\cup (12,102)", "(2,12) \\cup (12,102)", T), ("(2,102)", "(2,12) \\cup (12,102)", F),
        ("326.5", "326.5", T), (r"\frac{653}{2}", "326.5", T), ("326", "326.5", F), (".35625", ".35625", T),
        (r"\frac{57}{160}", ".35625", T), ("0.3562", ".35625", F), ("4.5", "4.5", T), (r"\frac92", "4.5", T), ("45", "4.5", F),
        (r"6\sqrt2", r"6\sqrt{2}", T), (r"\sqrt{72}", r"6\sqrt{2}", T), (r"2\sqrt6", r"6\sqrt{2}", F), (r"3R^2", "3R^2", T),
        (r"\frac{16}{27}", r"\frac{16}{27}", T), (r"\frac{27}{16}", r"\frac{16}{27}", F), (r"\frac{9}{256}", r"\frac{9}{256}", T),
        ("0.03515625", r"\frac{9}{256}", T), (r"\frac{9}{265}", r"\frac{9}{256}", F), (r"\frac{1}{16}", r"\frac{1}{16}", T),
        ("0.0625", r"\frac{1}{16}", T), ("0.625", r"\frac{1}{16}", F), (r"\frac{8}{21}", r"\frac{8}{21}", T),
        (r"\frac{16}{42}", r"\frac{8}{21}", T), ("0.381", r"\frac{8}{21}", F), (r"\frac{10}{11}", r"\frac{10}{11}", T),
        (r"0.\overline{90}", r"\frac{10}{11}", T), ("0.91", r"\frac{10}{11}", F), (r"28800", "28800", T), ("28,800", "28800", T),
        ("2880", "28800", F), (r"1+274i", "1+274i", T), (r"4005", "4005", T), ("4050", "4005", F), ("9", "9", T), ("-9", "9", F),
        (r"\sqrt{66}", r"\sqrt{66}", T), (r"\sqrt{6}\sqrt{11}", r"\sqrt{66}", T), (r"6\sqrt{11}", r"\sqrt{66}", F),
        (r"\frac{\sqrt{3}}{3}", r"\frac{\sqrt{3}}{3}", T), (r"\frac{1}{\sqrt3}", r"\frac{\sqrt{3}}{3}", T),
        (r"\sqrt{3}", r"\frac{\sqrt{3}}{3}", F), (r"-\sqrt{3}", r"-\sqrt{3}", T), (r"\sqrt{3}", r"-\sqrt{3}", F),
        (r"\frac{1}{2}", r"\frac{1}{2}", T), (r"\frac{3}{4}", r"\frac 34", T), (r"\frac{4}{3}", r"\frac 34", F),
        (r"-\frac{3}{8}", r"-\frac{3}{8}", T), ("-0.375", r"-\frac{3}{8}", T), ("-0.38", r"-\frac{3}{8}", F),
        (r"\frac{4}{9}", r"\frac{4}{9}", T), (r"0.\overline{4}", r"\frac{4}{9}", T), ("0.4", r"\frac{4}{9}", F),
        (r"\frac{13}{4}", r"\frac{13}{4}", T), ("3.25", r"\frac{13}{4}", T), (r"3\frac{1}{4}", r"\frac{13}{4}", T),
        (r"\frac{13}{6}", r"\frac{13}{4}", F), (r"8\pi", r"8 \pi", T), (r"8", r"8 \pi", F),
    ]


def hard():
    """True (or false) equivalences that need more than normalisation and arithmetic."""
    return [
        (r"\sin\frac{\pi}{6}", r"\frac{1}{2}", T), ("0.5", r"\cos\frac{\pi}{3}", T), (r"\log_2 8", "3", T),
        (r"\ln(e^2)", "2", T), (r"e^{i\pi}", "-1", T), (r"\tan\frac{\pi}{4}", "1", T), (r"x > 2", r"(2,\infty)", T),
        (r"x \ge 2", r"[2, \infty)", T), (r"\frac{\sqrt{2}}{2}", r"\sin 45^\circ", T), (r"\frac{1}{2}\sqrt{2}", r"\frac{\sqrt2}{2}", T),
        (r"\sqrt{2}\cdot\sqrt{8}", "4", T), (r"2\cdot 10^3", "2000", T), (r"\frac{1}{3}", r"0.\bar{3}", T),
        (r"x \le 3", r"3 \ge x", T), ("x < 3", "x > 3", F), (r"x = 1, y = 2", "(1,2)", T), (r"(x, y) = (1, 2)", "(1,2)", T),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "(1,2)", T), (r"x \in (1, 2)", "1 < x < 2", T), (r"\{1, 2\}", "(1,2)", F),
        (r"\frac{x+1}{x-1}", r"1+\frac{2}{x-1}", T), (r"\sqrt{x^2}", "|x|", T), (r"5 \text{ and } 7", r"\{5, 7\}", T),
        (r"\$1.50", r"1.5 \text{ dollars}", T), (r"3\%", "0.03", T),
    ]


CATEGORIES = {
    "fraction_decimal": fractions_and_decimals, "radical": radicals, "pi": pi_forms, "degrees": degrees,
    "units_text": units_and_text, "thousands": thousands, "tuple_interval": tuples_and_intervals,
    "set_list": sets_and_lists, "complex": complex_numbers, "expression": expressions, "equation": equations,
    "matrix": matrices, "base_subscript": bases, "repeating_decimal": repeating_decimals, "percent": percent,
    "formatting": formatting, "text_answer": text_answers, "integer": integers, "math500_style": math500_style,
    "hard": hard,
}


def main() -> None:
    rows, seen = [], set()
    for category, make in CATEGORIES.items():
        for pred, gold, label in make():
            if (pred, gold) in seen:
                continue
            seen.add((pred, gold))
            rows.append({"pred": pred, "gold": gold, "label": label, "category": category})
    with OUT.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    n_true = sum(r["label"] for r in rows)
    print(f"wrote {len(rows)} pairs ({n_true} true, {len(rows) - n_true} false) to {OUT}")


if __name__ == "__main__":
    main()
