"""``symformer fill`` on a stranger's template: no code runs, every run is bounded.

A corpus of server-side template injection payloads (Jinja2's own and ones aimed at
what the engine's objects used to expose: SymPy methods that ``sympify`` a string)
goes through the command line in process, in Markdown and in LaTeX delimiters.  Each
payload tries to create a canary file; none may, and each ends with exit status 0
or 2 within seconds.  The reproducers of /work/shared/repro/attack3 (``fill_*``)
are here verbatim, and every limit of the template language has its test.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import MAX_FILE_BYTES
from symformer.fill import Template, syntax, template
from symformer.fill.syntax import MAX_DEPTH, MAX_INTEGER, MAX_TAG_TOKENS, MAX_TAGS
from symformer.fill.template import MAX_OUTPUT, MAX_STEPS, Formatter

#: Python that creates the canary (CANARY is replaced by the file's path).
SHELL = "__import__('os').system('touch CANARY')"
OPEN = "open('CANARY', 'w').write('x')"

PAYLOADS = [
    # the engine's objects: SymPy's string-taking methods reach sympify
    '{{ layer1.head1.weights[1,3].stage.local[0].coeff("SHELL") }}',
    '{{ input[0,0].stage.local[0].diff("SHELL") }}',
    '{{ input[0,0].stage.local[0].subs("SHELL", 1) }}',
    '{{ input[0,0].stage.local.applyfunc("SHELL") }}',
    '{{ input.local[0].coeff("SHELL") }}',
    '{{ input[0,0].stage.derivation.example }}',
    '{{ input[0,0].stage.derivation.closed_form("SHELL", 0, 0) }}',
    '{{ input.closed_form(0, 0) }}',
    '{{ input.rounded(decimals=3) }}',
    '{{ input.exact() }}',
    '{{ input.__getattribute__("stage") }}',
    '{{ input["stage"] }}',
    '{{ input[0,0]["stage"] }}',
    '{{ input[0,0].stage }}',
    # Python's object graph
    '{{ input.__class__.__mro__[1].__subclasses__() }}',
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ input.__init__.__globals__['os'].system('touch CANARY') }}",
    "{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch CANARY') }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('id') }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('touch CANARY').read() }}",
    "{{ request.application.__globals__.__builtins__.OPEN }}",
    "{{ url_for.__globals__.os.popen('touch CANARY') }}",
    "{{ get_flashed_messages.__globals__ }}",
    # Jinja2's globals
    "{{ cycler.__init__.__globals__.os.popen('touch CANARY').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('touch CANARY').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('touch CANARY').read() }}",
    "{{ lipsum.__globals__['os'].popen('touch CANARY').read() }}",
    "{{ lipsum.__globals__.__builtins__.open('CANARY', 'w').write('x') }}",
    "{{ lipsum(1000000) }}",
    "{{ range.__init__.__globals__ }}",
    "{{ range(10) }}",
    "{{ dict(a=1) }}",
    "{{ dict.__base__.__subclasses__() }}",
    "{{ cycler(1, 2).next() }}",
    # Jinja2's filters
    "{{ input|attr('__class__')|attr('__mro__') }}",
    "{{ input[0,0]|attr('stage')|attr('local') }}",
    "{{ (input|attr('stage')).local }}",
    "{{ [1]|map('attr', '__class__')|list }}",
    "{{ '%s'|format(SHELL) }}",
    "{{ '{0.__class__}'.format(input) }}",
    "{{ 'SHELL'|e }}",
    "{{ 'abc'|upper }}",
    "{{ 'SHELL' | decimals }}",
    "{{ 'x' | table }}",
    "{{ input[0,0].stage.local[0].coeff(\"SHELL\") | safe }}",
    "{{ input[0,0] | decimals(9**9) }}",
    "{{ input[0,0] | decimals(n=3) }}",
    "{{ input[0,0] | attr('stage') }}",
    # statements
    '{% set x = input[0,0].stage %}{{ x.local[0].coeff("SHELL") }}',
    "{% set x = namespace() %}",
    "{% include 'CANARY' %}",
    "{% import 'os' as os %}{{ os.system('touch CANARY') }}",
    "{% from 'x' import y %}",
    "{% extends 'x' %}",
    "{% macro m() %}{{ OPEN }}{% endmacro %}{{ m() }}",
    '{% call input[0,0].stage.local[0].coeff("SHELL") %}{% endcall %}',
    "{% if True %}x{% endif %}",
    "{% with x = 1 %}{% endwith %}",
    "{% filter upper %}x{% endfilter %}",
    "{% raw %}{{ x }}{% endraw %}",
    "{% do input.stage %}",
    "{% for c in ''.__class__.__mro__ %}{{ c }}{% endfor %}",
    "{% for i in input %}{{ i }}{% endfor %}",
    "{% for i in [input] %}{{ i.stage.local }}{% endfor %}",
    "{% for i in range(10).__class__ %}{% endfor %}",
    "{% for i in ['SHELL'] %}{{ input[0,0] | decimals(i) }}{% endfor %}",
    "{% for i in ['stage'] %}{{ input[0,0][i] }}{% endfor %}",
    "{% for k, v in [1] %}{% endfor %}",
    "{% for i in [1] %}{{ loop.index }}{{ loop.cycle.__globals__ }}{% endfor %}",
    "{% for i in [1] if i.__class__ %}{% endfor %}",
    # expressions
    "{{ 'a' ~ 'b' }}",
    "{{ 9**(9**9) }}",
    "{{ 'x' * 1000000000 }}",
    "{{ 1 + 1 }}",
    "{{ input[0,0] if 1 else 2 }}",
    "{{ {'a': 1} }}",
    "{{ (1, 2) }}",
    "{{ [1, 2] }}",
    "{{ lambda: 1 }}",
    "{{ input[0,0] is defined }}",
    "{{ not input }}",
    r'{{ "\x5f\x5fclass\x5f\x5f" }}',
    r'{{ "\u005f" }}',
    "{{ input[-1, 0] }}",
    "{{ input[0:2] }}",
    "{{ input[0,0] }}{{ input[0,0] | exact }}",
    "{# {{ OPEN }} #}{{ input[1,0] | exact }}",
    "{{- input[0,0] -}}",
]


def latex(payload: str) -> str:
    """The same payload in the LaTeX delimiters."""
    for md, tex in (("{{", r"\VAR{"), ("}}", "}"), ("{%", r"\BLOCK{"), ("%}", "}"),
                    ("{#", r"\COMMENT{"), ("#}", "}")):
        payload = payload.replace(md, tex)
    return payload


def armed(payload: str, canary: Path) -> str:
    return (payload.replace("SHELL", SHELL).replace("OPEN", OPEN)
            .replace("CANARY", str(canary)))


def test_the_payloads_are_live(tmp_path):
    """The canary commands do create the canary when Python runs them."""
    for code in (SHELL, OPEN):
        canary = tmp_path / "canary"
        exec(code.replace("CANARY", str(canary)))  # noqa: S102 - the test's own string
        assert canary.exists()
        canary.unlink()


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_injection_runs_nothing(tmp_path, capsys, monkeypatch, payload, fmt):
    monkeypatch.chdir(tmp_path)  # a relative path in a payload lands here
    canary = tmp_path / "canary"
    text = armed(payload if fmt == "markdown" else latex(payload), canary)
    notes = tmp_path / ("notes.md" if fmt == "markdown" else "notes.tex")
    notes.write_text(f"before\n{text}\nafter\n")
    out = tmp_path / "out"
    start = time.monotonic()
    status = main(["fill", str(notes), "--out", str(out)])
    assert time.monotonic() - start < 10
    assert status in (0, 2)
    assert not canary.exists() and not (tmp_path / "id").exists()
    err = capsys.readouterr().err
    if status == 2:
        assert len(err.strip().splitlines()) == 1 and f"{notes}:2: " in err
        assert not out.exists()
    else:  # only plain values got through
        filled = out.read_text()
        assert "__" not in filled and "<" not in filled and "os" not in filled


REPRO = Path("/work/shared/repro/attack3")
# the reproducers, verbatim (the LaTeX one with its document), with the message each gets
REPROS = {
    "fill_rce.md": ('x = {{ layer1.head1.weights[1,3].stage.local[0].coeff("__import__(\'os\')'
                    ".system('id > canary_fill')\") }}\n", "a value has no attributes"),
    "fill_rce.tex": ("\\documentclass{article}\\begin{document}\n\\VAR{ input[0,0].stage.local"
                     "[0].diff(\"__import__('os').system('echo tex > canary_tex')\") }\n"
                     "\\end{document}\n", "a value has no attributes"),
    "fill_loop.md": ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}"
                     "{% endfor %}\n", f"limit of {MAX_STEPS:,} steps"),
    "fill_pow.md": ("{{ 9**(9**9) }}\n", "no operators"),
    "fill_mem.md": ('{{ "x" * 1000000000 }}\n', f"limit of {MAX_INTEGER:,}"),
    "fill_lipsum.md": ("{{ lipsum(1000000) }}\n", "calls nothing"),
}


@pytest.mark.parametrize("name", sorted(REPROS))
def test_attack3_reproducers(tmp_path, capsys, monkeypatch, name):
    text, message = REPROS[name]
    if (REPRO / name).exists():  # the shared copy, when this machine has it
        assert (REPRO / name).read_text() == text
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / name
    notes.write_text(text)
    start = time.monotonic()
    assert main(["fill", str(notes), "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - start < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert list(tmp_path.iterdir()) == [notes]  # no canary, no output


# -- the limits, each at and past its bound ------------------------------------


def render(text: str, block, fmt: str = "markdown") -> str:
    return Template(text, fmt).render(block, 3)


def refused(text: str, block, fmt: str = "markdown") -> str:
    with pytest.raises(InputError) as caught:
        render(text, block, fmt)
    return str(caught.value)


def test_steps_are_bounded(block, monkeypatch):
    monkeypatch.setattr(template, "MAX_STEPS", 2001)  # the real limit: the reproducer
    # a loop costs one step, each run of its body one, each text or value in it one
    assert render("{% for i in range(1000) %}x{% endfor %}", block) == "x" * 1000
    message = refused("{% for i in range(1001) %}x{% endfor %}", block)
    assert "more than the limit of 2,001 steps" in message
    # however the loops nest, and however little they write
    text = "{% for i in range(10) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
    assert "steps" in refused(text, block)
    empty = "{% for j in [] %}{% endfor %}" * 100
    assert "steps" in refused(f"{{% for i in range(100) %}}{empty}{{% endfor %}}", block)


def test_tags_are_bounded(block, monkeypatch):
    monkeypatch.setattr(syntax, "MAX_TAGS", 1000)
    monkeypatch.setattr(syntax, "MAX_TAG_TOKENS", 100)
    assert render("{{ 1 }}" * 1000, block) == "1" * 1000
    assert "more than the limit of 1,000 tags" in refused("{# #}" * 1001, block)
    items = ", ".join(["1"] * 46)
    assert render(f"{{% for i in [{items}] %}}{{% endfor %}}", block) == ""
    message = refused(f"{{% for i in [{items}, 1, 1] %}}{{% endfor %}}", block)
    assert "more than the limit of 100 tokens" in message


def test_the_limits_are_the_documented_ones():
    docs = (Path(__file__).parents[1] / "docs" / "fill.md").read_text()
    for limit in (MAX_STEPS, MAX_TAGS, MAX_TAG_TOKENS, MAX_INTEGER, MAX_OUTPUT):
        assert f"{limit:,}" in docs
    assert f"nest at most {MAX_DEPTH} deep" in docs
    assert f"at most {MAX_FILE_BYTES // 2**20} MiB" in docs


def test_integers_are_bounded(block):
    assert render(f"{{{{ {MAX_INTEGER} }}}} {{{{ -{MAX_INTEGER} }}}}", block) \
        == f"{MAX_INTEGER} -{MAX_INTEGER}"
    for text in (f"{{{{ {MAX_INTEGER + 1} }}}}", "{{ 9" + "9" * 5000 + " }}",
                 f"{{% for i in range(0, {MAX_INTEGER + 1}) %}}{{% endfor %}}",
                 f"{{{{ input[{MAX_INTEGER + 1}, 0] }}}}"):
        assert f"larger than the limit of {MAX_INTEGER:,}" in refused(text, block)


def test_nesting_is_bounded(block):
    def nested(depth: int) -> str:
        return ("{% for i in [1] %}" * depth) + "x" + ("{% endfor %}" * depth)

    assert render(nested(MAX_DEPTH), block) == "x"
    assert f"nested more than {MAX_DEPTH} deep" in refused(nested(MAX_DEPTH + 1), block)
    # a very deep nesting is refused by the same check, without recursion
    assert "nested more than" in refused(nested(100_000), block)


def test_output_is_bounded_and_tables_are_made_once(block, monkeypatch):
    made = []
    table = Formatter.table
    monkeypatch.setattr(Formatter, "table",
                        lambda self, *a: made.append(a) or table(self, *a))
    size = len(render("{{ output | table }}", block))
    assert len(made) == 1
    monkeypatch.setattr(template, "MAX_OUTPUT", 1000 * size)

    def loop(n: int) -> str:
        return f"{{% for i in range({n}) %}}{{{{ output | table }}}}{{% endfor %}}"

    assert len(render(loop(1000), block)) == 1000 * size
    message = refused(loop(1001), block)
    assert f"longer than the limit of {1000 * size:,} characters" in message
    assert len(made) == 3  # one table per render, however many times it is printed


def test_a_short_loop_over_a_table_ends_quickly(tmp_path, capsys):
    notes, out = tmp_path / "t.md", tmp_path / "o.md"
    notes.write_text("{% for i in range(99999) %}{{ output | table }}{% endfor %}")
    start = time.monotonic()
    assert main(["fill", str(notes), "--out", str(out)]) == 2
    assert time.monotonic() - start < 10
    assert "limit of" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "large", "binary"])
def test_notes_are_checked_like_an_example_file(tmp_path, capsys, kind):
    notes = tmp_path / "notes.md"
    if kind == "fifo":
        os.mkfifo(notes)
        message = "not a regular file"
    elif kind == "device":
        notes = Path("/dev/zero")
        message = "not a regular file"
    elif kind == "directory":
        notes.mkdir()
        message = "is a directory"
    elif kind == "large":
        notes.write_bytes(b"x" * (MAX_FILE_BYTES + 1))
        message = "larger than the limit of 8 MiB"
    else:
        notes.write_bytes(b"ok \xff\xfe")
        message = "not UTF-8 text (byte 3)"
    out = tmp_path / "out.md"
    assert main(["fill", str(notes), "--format", "markdown", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"symformer fill: error: {notes}: ")
    assert message in err[0] and not out.exists()
    if kind == "large":  # the largest file accepted is filled
        notes.write_bytes(b"x" * MAX_FILE_BYTES)
        assert main(["fill", str(notes), "--format", "markdown", "--out", str(out)]) == 0
        assert out.stat().st_size == MAX_FILE_BYTES


# -- random text made of the language's pieces ----------------------------------

PIECES = ["{{", "}}", "{%", "%}", "{#", "#}", r"\VAR{", r"\BLOCK{", r"\COMMENT{", "}", "{",
          "for", "endfor", "in", "range", "(", ")", "[", "]", ",", ".", "|", "-", "*", "~",
          " ", "\n", "i", "j", "input", "layer1", "head1", "weights", "output", "0", "1",
          "3", "999999", "'think'", '"x"', "decimals", "percent", "exact", "table",
          "bmatrix", "__class__", "stage", "local", "lipsum", "=", "set", "\\", "'", '"']


@settings(max_examples=120, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.sampled_from(["markdown", "latex"]))
def test_random_templates_end_in_a_result_or_one_error(block, pieces, fmt):
    try:
        filled = render("".join(pieces), block, fmt)
    except InputError as exc:
        message = str(exc)
        assert message.startswith("NOTES") and "\n" not in message.split(": ", 1)[0]
    else:
        assert len(filled) <= MAX_OUTPUT


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_text_after_a_loops_list_is_refused(block, fmt):
    """Attack 5, M6: ``range(3).__class__.__mro__`` after a loop's list was dropped
    silently and the loop ran; now it is a syntax error naming the tag's end."""
    def loop(head: str) -> str:
        return (f"{{% {head} %}}x{{% endfor %}}" if fmt == "markdown"
                else rf"\BLOCK{{ {head} }}x\BLOCK{{ endfor }}")

    assert render(loop("for x in range(3)"), block, fmt) == "xxx"
    assert render(loop("for y in [1, 2]"), block, fmt) == "xx"
    for head in ("for x in range(3).__class__.__mro__", "for y in [1, 2][0] junk junk",
                 "for y in [1] junk", "for x in range(2) range(3)"):
        message = refused(loop(head), block, fmt)
        assert "expected the end of the tag after the loop's list" in message, message
