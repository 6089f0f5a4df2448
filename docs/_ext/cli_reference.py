"""``.. infoclust-cli::``: the command-line reference, generated from the
parser the ``infoclust`` command itself builds (each command's and each
``fit`` method's ``--help``), so the page cannot drift from the program."""

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _subparsers(parser):
    """The sub-commands of a parser of the command (``CommandParser.subcommands``)."""
    return getattr(parser, "subcommands", {})


class CliReference(SphinxDirective):
    has_content = False

    def run(self):
        from infoclust_dask.cli import build_parser

        parser = build_parser()
        parser.prog = "infoclust"
        out = [self._section("infoclust", parser)]
        for name, sub in _subparsers(parser).items():
            sec = self._section(f"infoclust {name}", sub)
            for method, msub in _subparsers(sub).items():
                sec += self._section(f"infoclust {name} {method}", msub)
            out.append(sec)
        return out

    def _section(self, title, parser):
        sec = nodes.section(ids=[nodes.make_id(title)])
        sec += nodes.title(text=title)
        parser.prog = title
        text = parser.format_help()
        sec += nodes.literal_block(text, text)
        return sec


def setup(app):
    app.add_directive("infoclust-cli", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
