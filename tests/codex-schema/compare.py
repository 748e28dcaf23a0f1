#!/usr/bin/env python3
"""Compare our app-server protocol schema with Codex's, method by method.

Usage:
    compare.py --ours OURS_DIR --codex-stable DIR --codex-experimental DIR
               [--allowlist allowlist.json] [--overrides response-overrides.json]
               [--write-allowlist] [--docs docs/app-server.md] [--print-method-index]

OURS_DIR is what `interpreter app-server generate-json-schema OUT_DIR` writes (methods.json,
v1/*.json, v2/*.json). The Codex dirs are what `codex app-server generate-json-schema --out DIR`
writes, without and with `--experimental` (ClientRequest.json, ServerNotification.json,
ServerRequest.json, *.json, v1/*.json, v2/*.json; every type file self-contained).

For every client request, server notification and server request both sides serve, the params
(and the result, for requests) are normalised and walked path by path. Each difference becomes
a stable key, e.g.

    clientRequest thread/start params .approvalPolicy: variant granular missing in ours

Codex is compared in its `--experimental` form (a superset of the stable one); a difference
that does not occur against the stable form is suffixed ` (codex experimental)`, so that a
Codex field or method moving from experimental to stable changes the key and gets reviewed.

Every difference must be in the allow-list with a one-line `why`; the run fails on a
difference that is not, and on an allow-listed key that no longer occurs (stale).

With --docs, the method index of docs/app-server.md (the table under "## Every Codex method")
is checked too: every method Codex has and every method we serve has exactly one row of the
right kind; a row says `same as Codex` only for a method with no allow-listed difference,
`served: how it differs` for the others we serve, `out of scope: why`, `not served: why` or `not served yet: why` for
Codex's methods we do not serve, and `ours only: what` for ours alone. --print-method-index
prints a skeleton of that table for the current schemas. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

MAX_DEPTH = 16  # path segments; cycles (ThreadItem, Turn) are cut earlier by the ref stack
TAG_PROPS = ("type", "method", "kind", "status", "mode")
EXPERIMENTAL_SUFFIX = " (codex experimental)"

KINDS = ("clientRequest", "serverNotification", "serverRequest")
DOC_KINDS = {"clientRequest": "request", "serverNotification": "notification",
             "serverRequest": "server request"}
DOCS_HEADING = "## Every Codex method"
SERVED_STATUSES = ("same as Codex", "served")
UNSERVED_STATUSES = ("out of scope", "not served", "not served yet")


# ---------------------------------------------------------------------------------------------
# Loading


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def resolve_pointer(doc, ref):
    if not ref.startswith("#"):
        raise ValueError(f"external $ref not supported: {ref}")
    node = doc
    for part in ref[1:].lstrip("/").split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


class Codex:
    """One `codex app-server generate-json-schema` output directory."""

    def __init__(self, root):
        self.root = root
        self.unions = {}
        for kind, fname in (
            ("clientRequest", "ClientRequest.json"),
            ("serverNotification", "ServerNotification.json"),
            ("serverRequest", "ServerRequest.json"),
        ):
            doc = load_json(os.path.join(root, fname))
            methods = {}
            for variant in doc["oneOf"]:
                props = variant.get("properties", {})
                m = props.get("method", {})
                name = m["const"] if "const" in m else m["enum"][0]
                params = props.get("params")
                methods[name] = (doc, params)  # params None: no params property at all
            self.unions[kind] = methods
        # Type files by name: v2/ first, then the top level, then v1/.
        self.types = {}
        for sub in ("v2", "", "v1"):
            d = os.path.join(root, sub)
            if not os.path.isdir(d):
                continue
            for fname in sorted(os.listdir(d)):
                if fname.endswith(".json"):
                    self.types.setdefault(fname[:-5], os.path.join(d, fname))
        self._docs = {}

    def type_doc(self, name):
        if name not in self.types:
            return None
        if name not in self._docs:
            self._docs[name] = load_json(self.types[name])
        return self._docs[name]

    def params_name(self, kind, method):
        doc, params = self.unions[kind][method]
        name = ref_name(params)
        return name

    def params(self, kind, method):
        """(doc, node) of the params schema, or None when the method takes none."""
        doc, params = self.unions[kind][method]
        if params is None or params == {"type": "null"}:
            return None
        return (doc, params)


def ref_name(node):
    """Name of the type a params node refers to ($ref or anyOf [$ref, null])."""
    if not isinstance(node, dict):
        return None
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        for v in node.get(key, []):
            if isinstance(v, dict) and "$ref" in v:
                return v["$ref"].rsplit("/", 1)[-1]
    return None


class Ours:
    def __init__(self, root):
        self.root = root
        methods = load_json(os.path.join(root, "methods.json"))
        self.methods = {
            "clientRequest": methods["clientRequests"],
            "serverNotification": methods["serverNotifications"],
            "serverRequest": methods["serverRequests"],
        }
        self._docs = {}

    def doc(self, path):
        if path is None:
            return None
        if path not in self._docs:
            self._docs[path] = load_json(os.path.join(self.root, path + ".json"))
        return self._docs[path]

    def types(self, kind, method):
        v = self.methods[kind][method]
        if kind == "serverNotification":
            return v, None
        return v[0], v[1]


# ---------------------------------------------------------------------------------------------
# Normalisation: a schema node becomes (nullable, {alternative name: Alt})


class Alt:
    __slots__ = ("kind", "doc", "node", "value")

    def __init__(self, kind, doc=None, node=None, value=None):
        self.kind = kind  # any string integer number boolean enum object array
        self.doc = doc
        self.node = node
        self.value = value


SCHEMA_KEYS = {"type", "properties", "additionalProperties", "items", "enum", "const",
               "anyOf", "oneOf", "allOf", "$ref", "prefixItems"}


def deref(doc, node, seen=None):
    seen = seen or set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            break
        seen.add(ref)
        node = resolve_pointer(doc, ref)
    return node


def gather(doc, node, out, flags, depth=0):
    """Collect the alternatives of `node` into `out` (list of Alt); flags['nullable']."""
    if depth > 20:
        out.append(Alt("any"))
        return
    if node is True or node is None:
        out.append(Alt("any"))
        return
    if node is False:
        return
    node = deref(doc, node)
    if not isinstance(node, dict) or not (SCHEMA_KEYS & node.keys()):
        out.append(Alt("any"))
        return
    if "allOf" in node:
        parts = node["allOf"]
        if len(parts) == 1 and not ({"properties", "type"} & node.keys()):
            gather(doc, parts[0], out, flags, depth + 1)
            return
        merged = {"type": "object", "properties": {}, "required": []}
        for p in parts + [{k: v for k, v in node.items() if k != "allOf"}]:
            p = deref(doc, p)
            if isinstance(p, dict):
                merged["properties"].update(p.get("properties", {}))
                merged["required"] += p.get("required", [])
        out.append(Alt("object", doc, merged))
        return
    if ("anyOf" in node or "oneOf" in node) and "properties" in node:
        # An object with a flattened union (serde `#[serde(flatten)]` of an enum). Tagged
        # variants each get the base properties; otherwise one object with every variant's
        # properties, required where the base or every variant needs it.
        base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        variants = [deref(doc, v) for v in node.get("anyOf", []) + node.get("oneOf", [])]
        variants = [v for v in variants if isinstance(v, dict)]
        tagged = None
        for prop in TAG_PROPS:
            vals = [const_of(doc, v.get("properties", {}).get(prop, {})) for v in variants]
            if len(variants) > 1 and None not in vals and len(set(vals)) == len(vals):
                tagged = prop
                break
        if tagged:
            for v in variants:
                merged = {**base, **{k: x for k, x in v.items() if k not in ("properties",
                                                                           "required")}}
                merged.update(type="object",
                              properties={**node["properties"], **v.get("properties", {})},
                              required=sorted(set(node.get("required", []))
                                              | set(v.get("required", []))))
                out.append(Alt("object", doc, merged))
            return
        props, req_sets = dict(node["properties"]), []
        for v in variants:
            props.update(v.get("properties", {}))
            req_sets.append(set(v.get("required", [])))
        common = set.intersection(*req_sets) if req_sets else set()
        base.update(type="object", properties=props,
                    required=sorted(set(node.get("required", [])) | common))
        out.append(Alt("object", doc, base))
        return
    for key in ("anyOf", "oneOf"):
        if key in node:
            for v in node[key]:
                gather(doc, v, out, flags, depth + 1)
            return
    if "const" in node:
        value = node["const"]
        if value is None:
            flags["nullable"] = True
        else:
            out.append(Alt("enum", value=value))
        return
    if "enum" in node:
        for value in node["enum"]:
            if value is None:
                flags["nullable"] = True
            else:
                out.append(Alt("enum", value=value))
        return
    types = node.get("type")
    if types is None:
        if "properties" in node or "additionalProperties" in node:
            types = "object"
        elif "items" in node:
            types = "array"
        else:
            out.append(Alt("any"))
            return
    if isinstance(types, list):
        for t in types:
            gather(doc, {**node, "type": t}, out, flags, depth + 1)
        return
    if types == "null":
        flags["nullable"] = True
    elif types == "object":
        out.append(Alt("object", doc, node))
    elif types == "array":
        out.append(Alt("array", doc, node))
    else:
        out.append(Alt(types))


def const_of(doc, node):
    node = deref(doc, node)
    if isinstance(node, dict):
        if "const" in node and isinstance(node["const"], str):
            return node["const"]
        if isinstance(node.get("enum"), list) and len(node["enum"]) == 1 and isinstance(
            node["enum"][0], str
        ):
            return node["enum"][0]
    return None


def tag_of(alt, prop):
    return const_of(alt.doc, alt.node.get("properties", {}).get(prop, {}))


def ext_tag(alt):
    """Name of an externally tagged variant ({"granular": {...}}): its single, required
    property."""
    props = alt.node.get("properties", {})
    if len(props) == 1 and list(props) == list(alt.node.get("required", [])):
        return next(iter(props))
    return None


def normalise(doc, node):
    """-> (nullable, {name: Alt}). Names: 'string', 'object', 'array', 'any', '=value' (an enum
    value), 'type=agentMessage' (a tagged object variant), 'granular' (an externally tagged
    object variant {granular: ...}), 'free-form object'."""
    out, flags = [], {"nullable": False}
    gather(doc, node, out, flags)
    objects = [a for a in out if a.kind == "object"]
    tag = None
    if len(objects) > 1:
        counts = Counter(p for a in objects for p in TAG_PROPS if tag_of(a, p) is not None)
        if counts:
            tag = max(TAG_PROPS, key=lambda p: (counts[p], -TAG_PROPS.index(p)))
    alts = {}
    for i, a in enumerate(out):
        if a.kind == "enum":
            name = "=" + json.dumps(a.value) if not isinstance(a.value, str) else "=" + a.value
        elif a.kind == "object" and len(objects) > 1:
            if tag is not None and tag_of(a, tag) is not None:
                name = f"{tag}={tag_of(a, tag)}"
            elif ext_tag(a):
                name = ext_tag(a)
            elif is_free_object(a):
                name = "free-form object"
            else:
                name = a.node.get("title") or f"object#{objects.index(a)}"
        elif a.kind == "object" and a.node.get("additionalProperties") is False and ext_tag(a):
            name = ext_tag(a)  # a lone externally tagged variant next to enum values
        else:
            name = a.kind
        if name in alts and a.kind != "enum":
            name = f"{name}#{i}"
        alts[name] = a
    return flags["nullable"], alts


def retag(alts, other):
    """If `alts` has one plain 'object' and `other` has named object variants, name the plain
    object the way its counterpart is named (same tag property, or externally tagged) so the
    two line up."""
    if "object" not in alts or "object" in other:
        return alts
    obj = alts["object"]
    tags = {n.split("=", 1)[0] for n in other if "=" in n and not n.startswith("=")}
    for prop in sorted(tags):
        v = tag_of(obj, prop)
        if v is not None:
            alts = dict(alts)
            alts[f"{prop}={v}"] = alts.pop("object")
            return alts
    if ext_tag(obj) and ext_tag(obj) in other:
        alts = dict(alts)
        alts[ext_tag(obj)] = alts.pop("object")
    return alts


def base_kind(name, alt):
    if alt.kind == "enum":
        v = alt.value
        return "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else (
            "number" if isinstance(v, float) else "string")
    return alt.kind


# ---------------------------------------------------------------------------------------------
# Comparison


def is_free_object(alt):
    n = alt.node
    addl = n.get("additionalProperties", True)
    return not n.get("properties") and (addl is True or addl == {})


def fmt_path(path):
    return path or "."


class Walker:
    def __init__(self):
        self.diffs = []  # (path, message)

    def add(self, path, msg):
        self.diffs.append((fmt_path(path), msg))

    def compare(self, path, c, o, stack, depth):
        """c, o: (doc, node)."""
        if depth > MAX_DEPTH:
            return
        c_null, c_alts = normalise(*c)
        o_null, o_alts = normalise(*o)
        c_alts, o_alts = retag(c_alts, o_alts), retag(o_alts, c_alts)
        if "any" in c_alts or "any" in o_alts:
            if "any" in c_alts and "any" not in o_alts:
                self.add(path, "untyped in codex, typed in ours")
            elif "any" in o_alts and "any" not in c_alts:
                self.add(path, "untyped in ours, typed in codex")
            return
        if not c_alts and not o_alts:
            return  # both only null
        if c_null and not o_null:
            self.add(path, "nullable in codex, not in ours")
        elif o_null and not c_null:
            self.add(path, "nullable in ours, not in codex")

        c_kinds = sorted({base_kind(n, a) for n, a in c_alts.items()})
        o_kinds = sorted({base_kind(n, a) for n, a in o_alts.items()})
        c_set, o_set = set(c_kinds), set(o_kinds)
        # Object variants on one side only, next to kinds both have (an enum plus
        # {"granular": ...}), are reported below as variants rather than as a type mismatch.
        one_sided_objects = (c_set ^ o_set) == {"object"} and bool(c_set & o_set)
        if c_set != o_set and not one_sided_objects:
            self.add(path, f"type mismatch: codex {'|'.join(c_kinds)}, ours {'|'.join(o_kinds)}")

        # Enum values.
        c_enum = {n for n, a in c_alts.items() if a.kind == "enum"}
        o_enum = {n for n, a in o_alts.items() if a.kind == "enum"}
        if c_enum and o_enum:
            for n in sorted(c_enum - o_enum):
                self.add(path, f"enum value {n[1:]} missing in ours")
            for n in sorted(o_enum - c_enum):
                self.add(path, f"enum value {n[1:]} only in ours")
        elif c_enum and "string" in o_alts:
            self.add(path, "enum in codex, free string in ours")
        elif o_enum and "string" in c_alts:
            self.add(path, "free string in codex, enum in ours")

        # Object variants (tagged unions) and plain objects.
        c_obj = {n: a for n, a in c_alts.items() if a.kind == "object"}
        o_obj = {n: a for n, a in o_alts.items() if a.kind == "object"}
        if c_obj and not o_obj and one_sided_objects:
            for n in sorted(c_obj):
                self.add(path, f"variant {n} missing in ours")
        elif o_obj and not c_obj and one_sided_objects:
            for n in sorted(o_obj):
                self.add(path, f"variant {n} only in ours")
        if c_obj and o_obj:
            if set(c_obj) == {"object"} and set(o_obj) == {"object"}:
                self.compare_objects(path, c_obj["object"], o_obj["object"], stack, depth)
            elif set(c_obj) == {"object"} or set(o_obj) == {"object"}:
                self.add(path, f"shape: codex object variants {'|'.join(sorted(c_obj))}, "
                               f"ours {'|'.join(sorted(o_obj))}")
            else:
                for n in sorted(set(c_obj) - set(o_obj)):
                    self.add(path, f"variant {n} missing in ours")
                for n in sorted(set(o_obj) - set(c_obj)):
                    self.add(path, f"variant {n} only in ours")
                for n in sorted(set(c_obj) & set(o_obj)):
                    self.compare_objects(f"{path}<{n}>", c_obj[n], o_obj[n], stack, depth)

        if "array" in c_alts and "array" in o_alts:
            ca, oa = c_alts["array"], o_alts["array"]
            ci, oi = ca.node.get("items", True), oa.node.get("items", True)
            if isinstance(ci, list) or isinstance(oi, list):
                if ci != oi:
                    self.add(path + "[]", "tuple items differ")
                return
            self.compare(path + "[]", (ca.doc, ci), (oa.doc, oi), stack, depth + 1)

    def compare_objects(self, path, ca, oa, stack, depth):
        key = (id(ca.node), id(oa.node))
        if key in stack:
            return
        stack = stack | {key}
        c_free, o_free = is_free_object(ca), is_free_object(oa)
        if c_free or o_free:
            if c_free and not o_free:
                self.add(path, "free-form object in codex, structured in ours")
            elif o_free and not c_free:
                self.add(path, "free-form object in ours, structured in codex")
            return
        cp, op = ca.node.get("properties", {}), oa.node.get("properties", {})
        cr, orq = set(ca.node.get("required", [])), set(oa.node.get("required", []))
        for name in sorted(set(cp) - set(op)):
            self.add(f"{path}.{name}",
                     "property missing in ours" + (" (required in codex)" if name in cr else ""))
        for name in sorted(set(op) - set(cp)):
            self.add(f"{path}.{name}",
                     "property only in ours" + (" (required in ours)" if name in orq else ""))
        for name in sorted(set(cp) & set(op)):
            if name in cr and name not in orq:
                self.add(f"{path}.{name}", "required in codex, optional in ours")
            elif name in orq and name not in cr:
                self.add(f"{path}.{name}", "required in ours, optional in codex")
            self.compare(f"{path}.{name}", (ca.doc, cp[name]), (oa.doc, op[name]), stack, depth + 1)
        ca_add, oa_add = ca.node.get("additionalProperties"), oa.node.get("additionalProperties")
        if isinstance(ca_add, dict) and isinstance(oa_add, dict) and not cp and not op:
            self.compare(path + "{*}", (ca.doc, ca_add), (oa.doc, oa_add), stack, depth + 1)
        elif isinstance(ca_add, dict) and ca_add and not cp and op:
            self.add(path, "map in codex, fixed properties in ours")
        elif isinstance(oa_add, dict) and oa_add and not op and cp:
            self.add(path, "map in ours, fixed properties in codex")


def compare_pair(c, o):
    """c, o: (doc, node) or None (no params). -> list of (path, message)."""
    w = Walker()
    if c is None and o is None:
        return []
    if c is None:
        return [(".", "codex takes no params, ours declares some")]
    if o is None:
        # We declare none: the server ignores whatever params arrive.
        return [(".", "codex has params, ours declares none")]
    w.compare("", c, o, frozenset(), 0)
    return w.diffs


# ---------------------------------------------------------------------------------------------
# Method tables


def codex_response(codex, kind, method, our_result, overrides):
    """Name of Codex's response type for a request, or None."""
    if method in overrides.get(kind, {}):
        name = overrides[kind][method]
        return name if codex.type_doc(name) is not None else None
    pname = codex.params_name(kind, method)
    if pname and pname.endswith("Params"):
        name = pname[: -len("Params")] + "Response"
        if codex.type_doc(name) is not None:
            return name
    if our_result:
        name = our_result.rsplit("/", 1)[-1]
        if codex.type_doc(name) is not None:
            return name
    return None


def method_diffs(codex, ours, kind, method, overrides, problems):
    """-> list of key strings (without experimental suffix)."""
    o_params, o_result = ours.types(kind, method)
    c_params = codex.params(kind, method)
    o_params_ctx = (ours.doc(o_params), ours.doc(o_params)) if o_params else None
    keys = []
    for path, msg in compare_pair(c_params, o_params_ctx):
        keys.append(f"{kind} {method} params {path}: {msg}")
    if kind == "serverNotification":
        return keys
    rname = codex_response(codex, kind, method, o_result, overrides)
    if rname is None:
        problems.append(
            f"cannot resolve Codex's response type for {kind} {method} (ours: {o_result}); "
            f"add it to response-overrides.json")
        return keys
    rdoc = codex.type_doc(rname)
    if o_result is None:
        keys.append(f"{kind} {method} result .: ours declares no result type")
        return keys
    odoc = ours.doc(o_result)
    for path, msg in compare_pair((rdoc, rdoc), (odoc, odoc)):
        keys.append(f"{kind} {method} result {path}: {msg}")
    return keys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", required=True)
    ap.add_argument("--codex-stable", required=True)
    ap.add_argument("--codex-experimental", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--allowlist", default=os.path.join(here, "allowlist.json"))
    ap.add_argument("--overrides", default=os.path.join(here, "response-overrides.json"))
    ap.add_argument("--docs", help="check the method index of this docs/app-server.md")
    ap.add_argument("--print-method-index", action="store_true",
                    help="print a skeleton of the docs' method index table")
    ap.add_argument("--write-allowlist", action="store_true",
                    help="rewrite the allow-list with the current differences (keeps existing "
                         "whys, new entries get 'TODO'); review every TODO before committing")
    args = ap.parse_args()

    ours = Ours(args.ours)
    stable = Codex(args.codex_stable)
    exp = Codex(args.codex_experimental)
    overrides = load_json(args.overrides) if os.path.exists(args.overrides) else {}

    problems = []
    current = {}  # key -> True
    summary = []
    for kind in KINDS:
        ours_m = set(ours.methods[kind])
        exp_m = set(exp.unions[kind])
        stable_m = set(stable.unions[kind])
        shared = sorted(ours_m & exp_m)
        codex_only = exp_m - ours_m
        ours_only = sorted(ours_m - exp_m)
        shared_exp = [m for m in shared if m not in stable_m]
        summary.append(
            f"  {kind:19} shared {len(shared):3} ({len(shared) - len(shared_exp)} stable, "
            f"{len(shared_exp)} experimental)  codex-only {len(codex_only):3} "
            f"({len(codex_only & stable_m)} stable, "
            f"{len(codex_only - stable_m)} experimental)  ours-only {len(ours_only)}"
            + (f": {', '.join(ours_only)}" if ours_only else ""))
        if shared_exp:
            summary.append(f"    shared but experimental in codex: {', '.join(shared_exp)}")
        for method in shared:
            exp_keys = method_diffs(exp, ours, kind, method, overrides, problems)
            stable_keys = set(
                method_diffs(stable, ours, kind, method, overrides, [])
                if method in stable_m else [])
            for k in exp_keys:
                current[k if k in stable_keys else k + EXPERIMENTAL_SUFFIX] = True

    print("codex-schema: Codex 0.171.0 vs ours")
    print("\n".join(summary))

    allow = load_json(args.allowlist) if os.path.exists(args.allowlist) else {}
    allowed = allow.get("differences", {})

    if args.write_allowlist:
        out = {
            "_comment": allow.get("_comment", ""),
            "differences": {k: allowed.get(k, "TODO") for k in sorted(current)},
        }
        with open(args.allowlist, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"wrote {len(current)} entries to {args.allowlist}")

    new = sorted(k for k in current if k not in allowed)
    stale = sorted(k for k in allowed if k not in current)
    todo = sorted(k for k in current if allowed.get(k, "").strip() in ("", "TODO"))

    by_kind = Counter()
    for k in current:
        msg = k.split(": ", 1)[1].replace(EXPERIMENTAL_SUFFIX, "")
        by_kind[classify(msg)] += 1
    print(f"  differences: {len(current)} "
          f"({sum(1 for k in current if k.endswith(EXPERIMENTAL_SUFFIX))} only against "
          f"codex --experimental)")
    for kind, n in sorted(by_kind.items(), key=lambda x: -x[1]):
        print(f"    {n:4}  {kind}")

    if args.print_method_index:
        print_method_index(ours, stable, exp, allowed)
    if args.docs:
        problems.extend(check_method_index(args.docs, ours, exp, allowed))

    failed = False
    for p in problems:
        print(f"ERROR: {p}")
        failed = True
    if new:
        failed = True
        print(f"\nFAIL: {len(new)} difference(s) not in {os.path.basename(args.allowlist)}:")
        for k in new:
            print(f"  {k}")
        print("Either fix the difference, or, once reviewed, add it to \"differences\" in "
              f"{args.allowlist} with a one-line why saying what it means for a Codex client:")
        for k in new[:3]:
            print(f"    {json.dumps(k)}: \"accepted and ignored: ...\",")
        print("(tests/codex-schema/run.sh --write-allowlist adds every new key with a TODO why "
              "and drops stale ones; then replace each TODO.)")
    if stale:
        failed = True
        print(f"\nFAIL: {len(stale)} allow-listed difference(s) no longer occur (remove them):")
        for k in stale:
            print(f"  {k}")
    if todo and not new:
        failed = True
        print(f"\nFAIL: {len(todo)} allow-listed difference(s) have no why (TODO):")
        for k in todo[:50]:
            print(f"  {k}")
    if failed:
        return 1
    print("codex-schema: ok (every difference is allow-listed, none stale)")
    return 0


# ---------------------------------------------------------------------------------------------
# The docs' method index


def methods_with_differences(allowed):
    """(kind, method) pairs that have at least one allow-listed difference."""
    return {tuple(k.split(" ", 2)[:2]) for k in allowed}


def index_rows(ours, stable, exp):
    """(kind, method, where Codex has it) for every method of either side, sorted."""
    rows = []
    for kind in KINDS:
        for m in sorted(set(ours.methods[kind]) | set(exp.unions[kind])):
            codex = ("stable" if m in stable.unions[kind]
                     else "experimental" if m in exp.unions[kind] else "—")
            rows.append((kind, m, codex))
    return rows


def print_method_index(ours, stable, exp, allowed):
    differing = methods_with_differences(allowed)
    print("| method | kind | in Codex | here |")
    print("|---|---|---|---|")
    for kind, m, codex in index_rows(ours, stable, exp):
        if m not in ours.methods[kind]:
            here = "not served: TODO"
        elif codex == "—":
            here = "ours only: TODO"
        elif (kind, m) in differing:
            here = "served: TODO"
        else:
            here = "same as Codex"
        print(f"| `{m}` | {DOC_KINDS[kind]} | {codex} | {here} |")


def parse_method_index(path):
    """{(kind, method): [status text, ...]} from the table under DOCS_HEADING."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index(DOCS_HEADING)
    except ValueError:
        return None
    kinds = {v: k for k, v in DOC_KINDS.items()}
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        method, kind, _codex, here = cells
        rows.setdefault((kinds.get(kind, kind), method.strip("`")), []).append(here)
    return rows


def check_method_index(path, ours, exp, allowed):
    rows = parse_method_index(path)
    if rows is None:
        return [f"{path}: no '{DOCS_HEADING}' section"]
    differing = methods_with_differences(allowed)
    problems = []
    expected = set()
    for kind in KINDS:
        for m in set(ours.methods[kind]) | set(exp.unions[kind]):
            expected.add((kind, m))
            where = f"{path}: {DOC_KINDS[kind]} `{m}`"
            found = rows.get((kind, m), [])
            if len(found) != 1:
                problems.append(f"{where}: {len(found)} rows in the method index (want 1)")
                continue
            here = found[0]
            status = here.split(":", 1)[0].strip()
            if m in ours.methods[kind] and m in exp.unions[kind]:
                if status not in SERVED_STATUSES:
                    problems.append(f"{where}: we serve it, but the index says '{here}'")
                elif status == "same as Codex" and (kind, m) in differing:
                    problems.append(f"{where}: says 'same as Codex' but has allow-listed "
                                    "differences (say how it differs: 'served: ...')")
            elif m in ours.methods[kind]:
                if status != "ours only":
                    problems.append(f"{where}: Codex has no such method; say 'ours only: ...'")
            elif status not in UNSERVED_STATUSES:
                problems.append(f"{where}: we do not serve it, but the index says '{here}'")
            if status != "same as Codex" and not here.split(":", 1)[1:]:
                problems.append(f"{where}: '{status}' needs a reason after a colon")
            if "TODO" in here:
                problems.append(f"{where}: TODO in the method index")
    for kind, m in sorted(set(rows) - expected):
        problems.append(f"{path}: `{m}` ({DOC_KINDS.get(kind, kind)}) is in the method index "
                        "but neither side has it")
    return problems


def classify(msg):
    for prefix in ("property missing in ours (required in codex)", "property missing in ours",
                   "property only in ours (required in ours)", "property only in ours",
                   "required in codex, optional in ours", "required in ours, optional in codex",
                   "enum value", "variant", "type mismatch", "nullable in codex",
                   "nullable in ours", "enum in codex", "free string in codex", "untyped in ours",
                   "untyped in codex", "free-form object in ours", "free-form object in codex",
                   "codex has params", "codex takes no params", "map in", "shape"):
        if msg.startswith(prefix):
            if prefix in ("enum value", "variant"):
                return prefix + (" missing in ours" if msg.endswith("missing in ours")
                                 else " only in ours")
            return prefix
    return msg


if __name__ == "__main__":
    sys.exit(main())
