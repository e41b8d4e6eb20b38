"""OpenSSH's allowed-signers file, read byte for byte as `ssh-keygen -Y verify` and
`-Y find-principals` read it (OpenSSH 9.2, sshsig.c `parse_principals_key_and_options`,
`check_allowed_keys_line`), so that the file means to the bundler what it means to OpenSSH.

Why it is a port and not a tolerant parser: a reader that splits lines or fields differently
from OpenSSH lets a line hide from one of the two. Python's `str.splitlines()` ends a line at
CR, VT, FF, FS, GS, RS, NEL and U+2028, so `# note<CR>eve ssh-ed25519 KEY` was a key for eve to
us and a comment to OpenSSH. Here, as in OpenSSH:

- the file is split with `getline`: only LF ends a line, and a line ends at its first NUL (C
  strings);
- spaces and tabs are skipped at the start (OpenSSH 9.2; later versions skip CR and LF too, so a
  line starting with CR is a key to them and nobody's to 9.2: it vouches for nobody here);
- a line that is then empty or starts with `#` is nothing;
- principals, then options unless a key follows at once, then `KEYTYPE BASE64`, then anything;
- a line OpenSSH cannot read (bad options, a key it refuses: an RSA modulus under 1024 or over
  16384 bits, an unknown type, base64 it refuses) is skipped, and allows nothing.

Where this module trusts less than OpenSSH, it says so (`Line.honoured`): keys of types the
bundler cannot verify (`sk-`, certificates, DSA), keys whose base64 is not canonical,
`cert-authority`, a `namespaces=` that leaves out statics-bundler, and principals given only
by a pattern (`*`, `?`): such a line vouches for nobody. It never trusts more.

`valid-after`/`valid-before` are honoured as git honours them: judged at one time the caller
names (`AllowedSigners.principals_of`), the time a bundle landed on the branch, so that a key
retired today still vouches for what it signed while it was valid, and the board reads the
same tomorrow. A key is retired by writing `valid-before` on its line (`AllowedSigners.retired`),
never by deleting it.
"""

from __future__ import annotations

import base64
import binascii
import re

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import PrivateAttr

from bundler.core.model import Model
from bundler.local.signature import NAMESPACE, fingerprint
from bundler.local.sshtime import absolute_time, openssh_time

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
"""The key types the bundler verifies in process (bundler.local.signature)."""
RSA_MIN_BITS = 1024
"""`SSH_RSA_MINIMUM_MODULUS_SIZE` (sshkey.h): ssh-keygen says "Invalid key length" below it."""
RSA_MAX_BITS = 16384
"""`SSHBUF_MAX_BIGNUM` (sshbuf.h) in bits: OpenSSH reads no longer modulus."""
HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
"""A Hub user or organization name: the principals `signers add` writes, and the only ones the
bundler trusts (a pattern would allow people no one named)."""
SUBPATTERN_LIMIT = 1023
"""match.c: `match_pattern_list` answers "no match" for a subpattern this long or longer."""

_LINE_SPACE = b" \t"
_DELIMITER_SPACE = b" \t\r\n"
_C_SPACE = b" \t\n\v\f\r"
_NAMES = (b"namespaces=", b"valid-after=", b"valid-before=")


class KeyRefused(ValueError):
    """A public key OpenSSH or the bundler will not use, and why."""


class SignerKey(Model):
    """A public key as the bundler verifies it: its type and its canonical wire form."""

    key_type: str
    blob: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    def text(self) -> str:
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"

    @classmethod
    def read(cls, key_type: bytes, encoded: bytes) -> SignerKey:
        """The key `KEYTYPE BASE64` names; KeyRefused for one OpenSSH refuses (sshkey_read)
        or the bundler does not verify."""
        name = key_type.decode("ascii", "replace")
        if name not in KEY_TYPES:
            raise KeyRefused(f"a key of type {', '.join(KEY_TYPES)} is expected, not {name!r}")
        blob = _b64_pton(encoded)
        if not blob.startswith(len(key_type).to_bytes(4, "big") + key_type):
            raise KeyRefused(f"its key is not a {name} key")
        try:
            loaded = serialization.load_ssh_public_key(key_type + b" " + base64.b64encode(blob))
        except (ValueError, UnsupportedAlgorithm):
            raise KeyRefused(f"its key is no usable {name} key") from None
        if isinstance(loaded, rsa.RSAPublicKey) and not (
            RSA_MIN_BITS <= loaded.key_size <= RSA_MAX_BITS
        ):
            raise KeyRefused(
                f"an RSA key of {loaded.key_size} bits; OpenSSH uses RSA keys of "
                f"{RSA_MIN_BITS} to {RSA_MAX_BITS} bits"
            )
        canonical = loaded.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        if base64.b64decode(canonical.split()[1]) != blob:
            raise KeyRefused(f"its key is not in the canonical {name} form")
        return cls(key_type=name, blob=blob)


class Options(Model):
    """A line's options, as `sshsigopt_parse` reads them, and where its `valid-before` option
    sits among them (so that retiring a key rewrites only that option)."""

    cert_authority: bool = False
    namespaces: bytes | None = None
    valid_after: int = 0
    valid_before: int = 0
    valid_before_span: tuple[int, int] | None = None

    def valid_at(self, at: int) -> bool:
        """Whether `check_allowed_keys_line` lets the line stand at `at` (both bounds
        inclusive, as OpenSSH compares them)."""
        return not (self.valid_after and at < self.valid_after) and not (
            self.valid_before and at > self.valid_before
        )


class Line(Model):
    """One line of the file: its bytes (kept, so that an edit leaves other lines as they were),
    and what OpenSSH reads in it (`key` None: nothing, or nothing the bundler can verify)."""

    raw: bytes
    principals: bytes | None = None
    principals_span: tuple[int, int] = (0, 0)
    options_span: tuple[int, int] = (0, 0)
    quoted: bool = False
    options: Options | None = None
    key: SignerKey | None = None

    @property
    def names(self) -> frozenset[str] | None:
        """The Hub names the line allows, where every entry of its principals is a Hub name or
        a negated one: then OpenSSH's `match_pattern_list` allows exactly the names listed and
        not negated. None where an entry is a pattern (`*`, `?`) or anything else: the bundler
        cannot list whom it allows, and trusts it for nobody. (This also bounds the work a
        line of a million principals costs: linear.)"""
        listed = [entry.decode("latin-1") for entry in (self.principals or b"").split(b",")]
        if not all(HUB_NAME.fullmatch(entry.removeprefix("!")) for entry in listed):
            return None
        negated = {entry[1:] for entry in listed if entry.startswith("!")}
        return frozenset(entry for entry in listed if entry not in negated) - negated

    @property
    def honoured(self) -> bool:
        """Whether the bundler trusts this line as OpenSSH would in its own namespace, at the
        times its `valid-after`/`valid-before` allow."""
        options = self.options
        return (
            self.key is not None
            and self.names is not None
            and options is not None
            and not options.cert_authority
            and (
                options.namespaces is None
                or match_pattern_list(NAMESPACE.encode(), options.namespaces) == 1
            )
        )

    def allows(
        self, key: SignerKey, at: int, principal: bytes | None, namespace: bytes | None
    ) -> bool:
        """`check_allowed_keys_line` for a plain key (never a certificate): whether this line
        lets `key` sign for `principal` in `namespace` at `at` (None: not asked)."""
        options = self.options
        if self.key is None or options is None or options.cert_authority or self.key != key:
            return False
        if principal is not None and match_pattern_list(principal, self.principals or b"") != 1:
            return False
        if (
            namespace is not None
            and options.namespaces is not None
            and match_pattern_list(namespace, options.namespaces) != 1
        ):
            return False
        return options.valid_at(at)

    def without(self, name: str) -> Line | None:
        """This line with `name` off its principals; None when no one is left."""
        kept = [p for p in (self.principals or b"").split(b",") if p != name.encode()]
        return self.for_principals(kept) if kept else None

    def for_principals(self, principals: list[bytes]) -> Line:
        """This line with `principals` in place of its own, the rest of its bytes kept."""
        joined = b",".join(principals)
        text = b'"' + joined + b'"' if self.quoted else joined
        start, end = self.principals_span
        return read_line(self.raw[:start] + text + self.raw[end:])

    def valid_before(self, at: int) -> Line:
        """This line with `valid-before` at `at` (kept where it already ends sooner): the only
        bytes that change are that option's, or the option added before the key."""
        options = self.options
        assert options is not None
        if options.valid_before and options.valid_before <= at:
            return self
        written = f'valid-before="{openssh_time(at)}"'.encode()
        start, end = self.options_span
        if options.valid_before_span is not None:
            begin, finish = options.valid_before_span
            return read_line(self.raw[: start + begin] + written + self.raw[start + finish :])
        if start == end:
            return read_line(self.raw[:start] + written + b" " + self.raw[start:])
        return read_line(self.raw[:end] + b"," + written + self.raw[end:])


class SignerEntry(Model):
    """A signer as `bundler signers list` shows it."""

    principals: list[str]
    key_type: str
    fingerprint: str
    honoured: bool
    valid_after: str | None = None
    """The line's `valid-after`, UTC (`YYYYMMDDHHMMSSZ`): the key vouches for no bundle that
    landed before it. None: no such bound."""
    valid_before: str | None = None
    """The line's `valid-before`, UTC (`YYYYMMDDHHMMSSZ`), written when the key retired: the
    key vouches for no bundle that landed after it. None: no such bound."""


class AllowedSigners(Model):
    """The file's lines, in order, each with its bytes."""

    lines: tuple[Line, ...] = ()
    _trusted: dict[str, list[tuple[frozenset[str], Options]]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: object, /) -> None:
        """Who each key signs for and when, worked out once: review and the card ask per
        bundle."""
        for line in self.lines:
            if line.honoured and line.key is not None and line.names is not None:
                assert line.options is not None
                trusted = self._trusted.setdefault(line.key.fingerprint, [])
                trusted.append((line.names, line.options))

    @classmethod
    def parse(cls, data: bytes) -> AllowedSigners:
        """The lines of `data`, split as `getline` splits them; never fails: OpenSSH skips a
        line it cannot read, and so does this."""
        parts = data.split(b"\n")
        raws = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        return cls(lines=tuple(read_line(raw) for raw in raws))

    def to_bytes(self) -> bytes:
        return b"".join(line.raw for line in self.lines)

    def principals_of(self, key_fingerprint: str, at: int | None = None) -> set[str]:
        """The Hub names the key with this fingerprint signs for in the bundler's namespace at
        `at` (seconds since the epoch, as `ssh-keygen -Y verify -Overify-time` takes it), or,
        with None, at every time: only lines without `valid-after`/`valid-before` count then.
        Nobody, for a key no honoured line lists."""
        names: set[str] = set()
        for allowed, options in self._trusted.get(key_fingerprint, ()):
            timeless = not options.valid_after and not options.valid_before
            if timeless if at is None else options.valid_at(at):
                names.update(allowed)
        return names

    def lists(self, key_fingerprint: str) -> bool:
        """Whether an honoured line lists the key, at any time."""
        return key_fingerprint in self._trusted

    def with_signer(
        self, name: str, key: SignerKey, valid_after: int = 0, valid_before: int = 0
    ) -> AllowedSigners:
        """These lines and one more allowing `name` to sign with `key` in the bundler's
        namespace between `valid_after` and `valid_before` (0: no bound); the same lines when
        one already allows it at every time. Every other line is kept as it was."""
        if name in self.principals_of(key.fingerprint):
            return self
        bounds = "".join(
            f',{option}="{openssh_time(moment)}"'
            for option, moment in (("valid-after", valid_after), ("valid-before", valid_before))
            if moment
        )
        added = f'{name} namespaces="{NAMESPACE}"{bounds} {key.text()}\n'.encode()
        return self._appended(read_line(added))

    def _appended(self, line: Line) -> AllowedSigners:
        head = self.lines
        if head and not head[-1].raw.endswith(b"\n"):
            head = (*head[:-1], read_line(head[-1].raw + b"\n"))
        return AllowedSigners(lines=(*head, line))

    def retired(self, name: str, key: SignerKey | None, at: int) -> AllowedSigners:
        """These lines with `name`'s keys (only `key`, if given) valid no later than `at`: each
        line of theirs gets `valid-before`, so that what they signed before `at` still stands.
        A line `name` shares with others is split: the others keep it as it was, and a copy
        for `name` alone, right after it, gets the bound. Lines not theirs are kept byte for
        byte. A line that only becomes valid after `at` would be refused by OpenSSH with such
        a bound, so it is left as it is (`retirable` says which lines these are)."""
        kept: list[Line] = []
        for line in self.lines:
            if line not in self.retirable(name, key, at):
                kept.append(line)
                continue
            others = line.without(name)
            if others is not None and others.raw != line.raw:
                kept.append(others if others.raw.endswith(b"\n") else read_line(others.raw + b"\n"))
                line = line.for_principals([name.encode()])
            kept.append(line.valid_before(at))
        return AllowedSigners(lines=tuple(kept))

    def retirable(self, name: str, key: SignerKey | None, at: int) -> list[Line]:
        """The lines listing `name` (with `key`, if given) that a `valid-before` at `at` can
        retire: those valid at some time up to `at`."""
        return [
            line
            for line in self.lines
            if line.key is not None
            and line.options is not None
            and (key is None or line.key == key)
            and name.encode() in (line.principals or b"").split(b",")
            and not (line.options.valid_after and line.options.valid_after >= at)
        ]

    def without(self, name: str) -> AllowedSigners:
        """These lines with `name` taken off every line listing it (a line left with no one
        goes); lines that do not list it are kept byte for byte."""
        kept = []
        for line in self.lines:
            if line.key is None or name.encode() not in (line.principals or b"").split(b","):
                kept.append(line)
            elif (changed := line.without(name)) is not None:
                kept.append(changed)
        return AllowedSigners(lines=tuple(kept))

    def entries(self) -> list[SignerEntry]:
        return [
            SignerEntry(
                principals=(line.principals or b"").decode("utf-8", "replace").split(","),
                key_type=line.key.key_type,
                fingerprint=line.key.fingerprint,
                honoured=line.honoured,
                valid_after=_bound(line.options.valid_after if line.options else 0),
                valid_before=_bound(line.options.valid_before if line.options else 0),
            )
            for line in self.lines
            if line.key is not None
        ]


def _bound(moment: int) -> str | None:
    return openssh_time(moment) if moment else None


def read_public_key(text: str) -> SignerKey:
    """The key of an OpenSSH public key line (`KEYTYPE BASE64 [COMMENT]`); KeyRefused for one
    OpenSSH refuses or the bundler does not verify."""
    fields = text.encode("utf-8", "replace").split()
    if len(fields) < 2:
        raise KeyRefused("expected KEYTYPE BASE64 [COMMENT]")
    return SignerKey.read(fields[0], fields[1])


def read_line(raw: bytes) -> Line:
    """One line as `parse_principals_key_and_options` reads it (OpenSSH 9.2)."""
    text = raw.split(b"\0", 1)[0]
    start = len(text) - len(text.lstrip(_LINE_SPACE))
    cp = text[start:]
    if not cp or cp.startswith(b"#"):
        return Line(raw=raw)
    delimited = _strdelimw(cp)
    if delimited is None:
        return Line(raw=raw)
    principals, consumed, quoted, rest = delimited
    span = (start, start + consumed)
    found = _sshkey_read(rest)
    opts: bytes | None = None
    opts_at = len(text) - len(rest)
    options_span = (opts_at, opts_at)
    if found is None:
        end = _advance_past_options(rest)
        if end is None or end == len(rest):
            return Line(raw=raw, principals=principals)
        opts, rest = rest[:end], rest[end + 1 :].lstrip(_LINE_SPACE)
        options_span = (opts_at, opts_at + end)
        found = _sshkey_read(rest)
        if found is None:
            return Line(raw=raw, principals=principals)
    options = _options(opts)
    if options is None:
        return Line(raw=raw, principals=principals)
    return Line(
        raw=raw,
        principals=principals,
        principals_span=span,
        options_span=options_span,
        quoted=quoted,
        options=options,
        key=found,
    )


def _strdelimw(s: bytes) -> tuple[bytes, int, bool, bytes] | None:
    """misc.c `strdelimw`: the first token (a `"` quotes up to the next), how many bytes of `s`
    it took, whether it was quoted, and the rest after the whitespace that follows; None where
    OpenSSH finds no token followed by anything (the line is invalid)."""
    at = next((i for i, byte in enumerate(s) if byte in _DELIMITER_SPACE + b'"'), None)
    if at is None:
        return None
    if s[at : at + 1] == b'"':
        close = s.find(b'"', at + 1)
        if close < 0:
            return None
        token, rest, consumed = s[:at] + s[at + 1 : close], s[close + 1 :], close + 1
    else:
        token, rest, consumed = s[:at], s[at + 1 :], at
    return token, consumed, consumed != at, rest.lstrip(_DELIMITER_SPACE)


def _sshkey_read(s: bytes) -> SignerKey | None:
    """sshkey.c `sshkey_read`: the key at the start of `s`; None where OpenSSH reads none there
    (so what is there may be options), or one the bundler does not verify: such a line then
    reads as options and is refused, and OpenSSH's key in it is none the bundler could meet."""
    space = next((i for i, byte in enumerate(s) if byte in _LINE_SPACE), None)
    if space is None:
        return None
    key_type, rest = s[:space], s[space:].lstrip(_LINE_SPACE)
    if not rest:
        return None
    end = next((i for i, byte in enumerate(rest) if byte in _LINE_SPACE), len(rest))
    try:
        return SignerKey.read(key_type, rest[:end])
    except KeyRefused:
        return None


def _advance_past_options(s: bytes) -> int | None:
    """authfile.c `sshkey_advance_past_options`: where the options end (a space or tab outside
    quotes, or the end); None for an unterminated quote."""
    quoted, i = False, 0
    while i < len(s) and (quoted or s[i] not in _LINE_SPACE):
        if s[i : i + 2] == b'\\"':
            i += 1
        elif s[i : i + 1] == b'"':
            quoted = not quoted
        i += 1
    return None if i == len(s) and quoted else i


def _options(opts: bytes | None) -> Options | None:
    """sshsig.c `sshsigopt_parse`; None where OpenSSH refuses them (the line then allows
    nothing)."""
    found = Options()
    if not opts:
        return found
    i = 0
    while i < len(opts) and opts[i : i + 1] not in (b" ", b"\t"):
        begin = i
        lowered = opts[i:].lower()
        if lowered.startswith(b"cert-authority"):
            found.cert_authority = True
            i += len(b"cert-authority")
        elif name := next((n for n in _NAMES if lowered.startswith(n)), None):
            dequoted = _dequote(opts, i + len(name))
            if dequoted is None:
                return None
            value, i = dequoted
            if name == b"namespaces=":
                if found.namespaces is not None:
                    return None
                found.namespaces = value
            else:
                field = "valid_after" if name == b"valid-after=" else "valid_before"
                moment = absolute_time(value)
                if getattr(found, field) or not moment:
                    return None
                setattr(found, field, moment)
                if field == "valid_before":
                    found.valid_before_span = (begin, i)
        if i == len(opts) or opts[i : i + 1] in (b" ", b"\t"):
            break
        if opts[i : i + 1] != b",":
            return None
        i += 1
        if i == len(opts):
            return None
    if found.valid_after and found.valid_before and found.valid_before <= found.valid_after:
        return None
    return found


def _dequote(s: bytes, i: int) -> tuple[bytes, int] | None:
    """misc.c `opt_dequote`: the quoted value at `i` (`\\"` for a quote) and where it ends."""
    if s[i : i + 1] != b'"':
        return None
    value = bytearray()
    i += 1
    while i < len(s) and s[i : i + 1] != b'"':
        if s[i : i + 2] == b'\\"':
            i += 1
        value += s[i : i + 1]
        i += 1
    if i == len(s):
        return None
    return bytes(value), i + 1


def _b64_pton(encoded: bytes) -> bytes:
    """base64.c `b64_pton`: whitespace anywhere is skipped (a key's base64 may hold CR or VT);
    padding and trailing bits must be exact."""
    stripped = bytes(byte for byte in encoded if byte not in _C_SPACE)
    try:
        blob = base64.b64decode(stripped, validate=True)
    except binascii.Error:
        raise KeyRefused("its key is not base64") from None
    if base64.b64encode(blob) != stripped:
        raise KeyRefused("its key is not base64")
    return blob


def match_pattern_list(string: bytes, patterns: bytes) -> int:
    """match.c `match_pattern_list`: -1 when a negated subpattern matches, 1 when a positive
    one does, else 0."""
    got_positive = 0
    for sub in patterns.split(b","):
        negated = sub.startswith(b"!")
        sub = sub[1:] if negated else sub
        if len(sub) >= SUBPATTERN_LIMIT:
            return 0
        if _match_pattern(string, sub):
            if negated:
                return -1
            got_positive = 1
    return got_positive


def _match_pattern(string: bytes, pattern: bytes) -> bool:
    """match.c `match_pattern`: `*` any run, `?` any byte, the rest literally. Run as the
    automaton OpenSSH now uses (the set of pattern positions reached), so that a hostile
    pattern costs len(string) x len(pattern), never the backtracking of a regex."""
    states = _closure({0}, pattern)
    for byte in string:
        reached = set()
        for at in states:
            if at < len(pattern):
                if pattern[at] == ord("*"):
                    reached.add(at)
                elif pattern[at] in (ord("?"), byte):
                    reached.add(at + 1)
        states = _closure(reached, pattern)
        if not states:
            return False
    return len(pattern) in states


def _closure(states: set[int], pattern: bytes) -> set[int]:
    """The positions reached from `states` without reading: past any `*`."""
    closed = set(states)
    for at in sorted(states):
        while at < len(pattern) and pattern[at] == ord("*"):
            at += 1
            closed.add(at)
    return closed
