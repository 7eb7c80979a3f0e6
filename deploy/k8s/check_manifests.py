#!/usr/bin/python3
"""Offline checks of Sluice's Kubernetes manifests and daemon configs.

No cluster and no network: every document listed by kustomization.yaml is
checked against the Kubernetes API models of Debian's python3-kubernetes
(field names, types, required fields), then against what the manifests
must agree on among themselves (selectors, ports, volumes, secrets) and
against the daemons (config keys and flags from `dispatcherd --help` and
`workerd --help` of the build, and the keys their sources register).

  /usr/bin/python3 deploy/k8s/check_manifests.py [--build DIR]
      [--daemon-config dispatcher=FILE] [--daemon-config worker=FILE]

Prints one line per problem and exits 1 when there is any.
"""

import argparse
import ipaddress
import os
import re
import subprocess
import sys

import yaml

from check_autoscaling import check_autoscaler

try:
    import kubernetes.client as k8s
except ImportError:
    sys.exit("check_manifests: needs python3-kubernetes (apt-get install python3-kubernetes)")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Objects the operator creates before `kubectl apply -k` (README.md), with
# the keys the pods read from each.
EXTERNAL_SECRETS = {
    "sluice-tokens": {"cluster.token", "client.token", "metrics.token"},
    "sluice-dispatcher-tls": {"tls.crt", "tls.key", "ca.crt"},
    "sluice-worker-tls": {"tls.crt", "tls.key", "ca.crt"},
}
EXTERNAL_PVCS = {"sluice-data"}

KINDS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    # autoscaling/v2 (GA in 1.23) has the fields of v2beta2, the newest the
    # models know.
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2beta2HorizontalPodAutoscaler",
}

# Fields newer than python3-kubernetes 22.6 (Kubernetes 1.22): the native
# gRPC probe (beta in 1.24, GA in 1.27).
EXTRA_FIELDS = {"V1Probe": {"grpc": "X_GRPCAction"}}
EXTRA_MODELS = {"X_GRPCAction": ({"port": "int", "service": "str"}, {"port"})}

QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Settings being added to the daemons that neither the build nor the
# sources define yet: accepted with a note. Delete each once it lands.
PENDING_KEYS = {"dispatcher": {}, "worker": {}}

PROGRAMS = {"dispatcherd": "dispatcher", "workerd": "worker"}


class Checker:
    def __init__(self):
        self.errors = []
        self.pending = {}  # daemon kind -> pending keys a config used
        self.settings = {}  # daemon kind -> the settings of its container's config

    def error(self, where, message):
        self.errors.append(f"{where}: {message}")


# --- the daemons' settings -------------------------------------------------

def flag_name(key):
    """'tls.cert_file' -> 'tls-cert-file', as ConfigSchema::FlagName."""
    return key.replace("_", "-").replace(".", "-")


def daemon_schema(kind, build_dir):
    """{flag name: 'int' | 'str' | 'list' | 'bool'} for a daemon, and where it came from.

    `KIND --help` of the build, and the keys the sources register: a build
    older than the sources must not fail a config written for the sources.
    """
    schema, sources = {}, []
    binary = os.path.join(build_dir, kind, kind + "d")
    if os.access(binary, os.X_OK):
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10).stdout
        for m in re.finditer(r"^\s+--([a-z0-9][a-z0-9.-]*)(?:\s+(INT|TEXT|BOOLEAN|UINT|FLOAT)(\s+\.\.\.)?)?",
                             out, re.M):
            name, typ, many = m.group(1), m.group(2), m.group(3)
            schema[name] = "list" if many else {"INT": "int", "UINT": "int", "FLOAT": "int",
                                                 "TEXT": "str", "BOOLEAN": "bool", None: "bool"}[typ]
        sources.append(f"{os.path.relpath(binary, REPO)} --help")
    for rel in sorted(os.path.join(d, f) for d in (kind, "service") if os.path.isdir(os.path.join(REPO, d))
                      for f in os.listdir(os.path.join(REPO, d)) if f.endswith(".cc") and not f.endswith("_test.cc")):
        path = os.path.join(REPO, rel)
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r'Add(Int|String|StringList|Bool)\(\s*"([a-z0-9_.]+)"', text):
            schema.setdefault(flag_name(m.group(2)), {"Int": "int", "String": "str", "StringList": "list",
                                                      "Bool": "bool"}[m.group(1)])
    sources.append(f"{kind}/*.cc and service/*.cc")
    schema.pop("help", None)
    schema["config"] = "str"
    return schema, ", ".join(sources)


def flatten(config, prefix=""):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from flatten(value, prefix + str(key) + ".")
        else:
            yield prefix + str(key), value


def value_type_ok(typ, value):
    if typ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if typ == "bool":
        return isinstance(value, bool)
    if typ == "list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, str)


def is_loopback(address):
    """As the daemons' IsLoopbackAddress: a host name counts as reachable."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def check_daemon_config(kind, config, where, schemas, chk):
    """Keys, types and the bind-address rule; returns the flattened settings."""
    schema, _ = schemas[kind]
    if not isinstance(config, dict):
        chk.error(where, f"a {kind} config is a map of settings")
        return {}
    settings = dict(flatten(config))
    for key, value in settings.items():
        name = flag_name(key)
        typ = schema.get(name)
        if typ is None and key in PENDING_KEYS[kind]:
            typ = PENDING_KEYS[kind][key]
            chk.pending.setdefault(kind, []).append(key)
        if typ is None:
            chk.error(where, f"unknown {kind} setting '{key}'")
        elif not value_type_ok(typ, value):
            chk.error(where, f"'{key}' must be {typ}, got {value!r}")
    # The daemons' safe default: beyond loopback only with auth or TLS, or insecure.
    bind = settings.get("bind_address", "127.0.0.1")
    auth = settings.get("auth.cluster_token_file") and settings.get("auth.client_token_file")
    tls = settings.get("tls.cert_file") and settings.get("tls.key_file")
    if not is_loopback(bind) and not (auth or tls) and settings.get("insecure") is not True:
        chk.error(where, f"bind_address {bind} without auth or TLS: {kind}d refuses to start")
    return settings


# --- Kubernetes API models --------------------------------------------------

def model_fields(name):
    if name in EXTRA_MODELS:
        types, _ = EXTRA_MODELS[name]
        return {k: (k, t) for k, t in types.items()}
    cls = getattr(k8s, name)
    fields = {cls.attribute_map[a]: (a, t) for a, t in cls.openapi_types.items()}
    for json_key, typ in EXTRA_FIELDS.get(name, {}).items():
        fields[json_key] = (json_key, typ)
    return fields


def check_model(value, typ, path, chk, where):
    if typ.startswith("list["):
        if not isinstance(value, list):
            return chk.error(where, f"{path}: must be a list")
        for i, item in enumerate(value):
            check_model(item, typ[5:-1], f"{path}[{i}]", chk, where)
        return
    if typ.startswith("dict("):
        if not isinstance(value, dict):
            return chk.error(where, f"{path}: must be a map")
        inner = typ[typ.index(",") + 1:-1].strip()
        for k, v in value.items():
            if not isinstance(k, str):
                chk.error(where, f"{path}: key {k!r} must be a string")
            quantity = path.endswith((".limits", ".requests"))
            if quantity:
                if not (isinstance(v, (int, float, str)) and not isinstance(v, bool) and QUANTITY.match(str(v))):
                    chk.error(where, f"{path}.{k}: {v!r} is not a quantity")
            else:
                check_model(v, inner, f"{path}.{k}", chk, where)
        return
    if typ == "str":
        if path.endswith((".sizeLimit", ".storage")):
            if not QUANTITY.match(str(value)):
                chk.error(where, f"{path}: {value!r} is not a quantity")
        elif not isinstance(value, str):
            # Annotations and ConfigMap data must be strings: `port: 9090` is refused.
            chk.error(where, f"{path}: must be a string, got {value!r}")
        return
    if typ == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            chk.error(where, f"{path}: must be an integer, got {value!r}")
        return
    if typ == "bool":
        if not isinstance(value, bool):
            chk.error(where, f"{path}: must be true or false, got {value!r}")
        return
    if typ in ("object", "datetime", "float"):
        return
    if not isinstance(value, dict):
        return chk.error(where, f"{path}: must be a map ({typ})")
    fields = model_fields(typ)
    kwargs = {}
    for key, child in value.items():
        if key not in fields:
            chk.error(where, f"{path}: unknown field '{key}' (in {typ})")
            continue
        attr, child_type = fields[key]
        check_model(child, child_type, f"{path}.{key}", chk, where)
        kwargs[attr] = child
    # Required fields and enums: the models' own setters check them.
    if typ in EXTRA_MODELS:
        for missing in EXTRA_MODELS[typ][1] - set(value):
            chk.error(where, f"{path}: '{missing}' is required")
        return
    extra = EXTRA_FIELDS.get(typ, {})
    try:
        getattr(k8s, typ)(local_vars_configuration=k8s.Configuration(),
                          **{a: v for a, v in kwargs.items() if a not in extra})
    except (ValueError, TypeError) as e:
        chk.error(where, f"{path}: {e}")


# --- the set as a whole -----------------------------------------------------

def load_yaml(path, chk, many=False):
    try:
        with open(path, encoding="utf-8") as f:
            return list(yaml.safe_load_all(f)) if many else yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        chk.error(os.path.relpath(path, REPO), str(e).replace("\n", " "))
        return [] if many else None


def pod_templates(docs):
    for where, doc in docs:
        if doc.get("kind") in ("StatefulSet", "Deployment"):
            yield where, doc, doc.get("spec", {})


def check_set(k8s_dir, schemas, chk):
    kfile = os.path.join(k8s_dir, "kustomization.yaml")
    kust = load_yaml(kfile, chk) or {}
    kwhere = os.path.relpath(kfile, REPO)
    if kust.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or kust.get("kind") != "Kustomization":
        chk.error(kwhere, "apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization")
    known_k = {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "images", "labels",
               "commonLabels", "commonAnnotations", "patches", "secretGenerator", "namePrefix"}
    for key in set(kust) - known_k:
        chk.error(kwhere, f"unexpected kustomization field '{key}'")
    resources = kust.get("resources") or []
    if not resources:
        chk.error(kwhere, "no resources")
    # A manifest left out of resources is never applied.
    listed = {os.path.normpath(r) for r in resources}
    for name in sorted(os.listdir(k8s_dir)):
        if name.endswith((".yaml", ".yml")) and name != "kustomization.yaml" and name not in listed:
            chk.error(kwhere, f"{name} is not listed in resources")

    configmaps = {}  # name -> {file key: text}
    for gen in kust.get("configMapGenerator") or []:
        data = {}
        for f in gen.get("files") or []:
            key, _, rel = f.rpartition("=") if "=" in f else (os.path.basename(f), "", f)
            path = os.path.join(k8s_dir, rel)
            if not os.path.exists(path):
                chk.error(kwhere, f"configMapGenerator {gen.get('name')}: no file {rel}")
                continue
            data[key] = open(path, encoding="utf-8").read()
        configmaps[gen.get("name")] = data

    docs = []
    for rel in resources:
        path = os.path.join(k8s_dir, rel)
        if not os.path.exists(path):
            chk.error(kwhere, f"resource {rel} does not exist")
            continue
        for i, doc in enumerate(load_yaml(path, chk, many=True)):
            if doc is None:
                continue
            where = f"deploy/k8s/{rel}#{i}"
            if not isinstance(doc, dict):
                chk.error(where, "a document must be a map")
                continue
            model = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
            if model is None:
                chk.error(where, f"unknown apiVersion/kind {doc.get('apiVersion')}/{doc.get('kind')}")
                continue
            name = (doc.get("metadata") or {}).get("name", "")
            where = f"deploy/k8s/{rel}: {doc['kind']} {name}"
            if not DNS_LABEL.match(name or ""):
                chk.error(where, "metadata.name must be a DNS label")
            check_model(doc, model, doc["kind"], chk, where)
            docs.append((where, doc))
            if doc["kind"] == "ConfigMap":
                configmaps[name] = doc.get("data") or {}

    def name(d):
        return (d.get("metadata") or {}).get("name")

    services = {name(d): (w, d) for w, d in docs if d["kind"] == "Service" and isinstance(d.get("spec"), dict)}
    pvcs = {name(d) for w, d in docs if d["kind"] == "PersistentVolumeClaim"}
    workloads = list(pod_templates(docs))
    if not any(d["kind"] == "StatefulSet" for _, d, _ in workloads):
        chk.error(kwhere, "no StatefulSet (the dispatcher)")
    if not any(d["kind"] == "Deployment" for _, d, _ in workloads):
        chk.error(kwhere, "no Deployment (the workers)")

    for where, doc, spec in workloads:
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        if not match or any(labels.get(k) != v for k, v in match.items()):
            chk.error(where, f"selector {match} does not match the template's labels {labels}")
        if doc["kind"] == "StatefulSet":
            svc = services.get(spec.get("serviceName"))
            if svc is None or svc[1]["spec"].get("clusterIP") != "None":
                chk.error(where, f"serviceName {spec.get('serviceName')!r} is not a headless Service here")
            if spec.get("replicas") != 1:
                chk.error(where, "the dispatcher must have exactly 1 replica (one journal writer)")
        check_pod(where, doc, spec, tmpl, configmaps, pvcs, services, schemas, chk)

    for where, svc in services.values():
        selector = svc["spec"].get("selector") or {}
        targets = [(w, s) for w, _, s in workloads
                   if all(((s.get("template") or {}).get("metadata") or {}).get("labels", {}).get(k) == v
                          for k, v in selector.items())]
        if not targets:
            chk.error(where, f"selector {selector} matches no pod template")
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            for w, s in targets:
                if not any(target in (p.get("name"), p.get("containerPort"))
                           for c in s["template"]["spec"].get("containers", []) for p in c.get("ports") or []):
                    chk.error(where, f"targetPort {target!r} is no container port of {w}")

    for where, doc in docs:
        if doc["kind"] == "HorizontalPodAutoscaler":
            check_autoscaler(where, doc, workloads, chk, load_yaml)


def check_pod(where, doc, spec, tmpl, configmaps, pvcs, services, schemas, chk):
    pod = tmpl.get("spec") or {}
    psc = pod.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True:
        chk.error(where, "pod securityContext.runAsNonRoot must be true")
    if not psc.get("runAsUser"):
        chk.error(where, "pod securityContext.runAsUser must be a non-zero uid")
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    for claim in spec.get("volumeClaimTemplates") or []:
        claim_name = (claim.get("metadata") or {}).get("name")
        volumes[claim_name] = {"name": claim_name, "claimTemplate": claim}
    for name, vol in volumes.items():
        if "configMap" in vol and vol["configMap"].get("name") not in configmaps:
            chk.error(where, f"volume {name}: no ConfigMap {vol['configMap'].get('name')!r} in the set")
        if "secret" in vol:
            sec = vol["secret"]
            secret = sec.get("secretName")
            if secret not in EXTERNAL_SECRETS:
                chk.error(where, f"volume {name}: Secret {secret!r} is not one README.md tells to create")
            if sec.get("defaultMode") != 0o400 or any(i.get("mode", 0o400) != 0o400 for i in sec.get("items") or []):
                chk.error(where, f"volume {name}: secret files must be mode 0400")
            for item in sec.get("items") or []:
                if item.get("key") not in EXTERNAL_SECRETS.get(secret, set()):
                    chk.error(where, f"volume {name}: {secret} has no key {item.get('key')!r} in README.md")
        if "persistentVolumeClaim" in vol:
            claim = vol["persistentVolumeClaim"].get("claimName")
            if claim not in pvcs and claim not in EXTERNAL_PVCS:
                chk.error(where, f"volume {name}: no PersistentVolumeClaim {claim!r}")

    annotations = (tmpl.get("metadata") or {}).get("annotations") or {}
    if annotations.get("prometheus.io/scrape") != "true" or not annotations.get("prometheus.io/path"):
        chk.error(where, "pod template needs prometheus.io/scrape \"true\" and prometheus.io/path")

    for c in pod.get("containers") or []:
        cwhere = f"{where} container {c.get('name')}"
        ports = c.get("ports") or []
        port_ids = {p.get("name") for p in ports} | {p.get("containerPort") for p in ports}
        csc = c.get("securityContext") or {}
        if csc.get("readOnlyRootFilesystem") is not True or csc.get("allowPrivilegeEscalation") is not False:
            chk.error(cwhere, "needs readOnlyRootFilesystem: true and allowPrivilegeEscalation: false")
        if "ALL" not in ((csc.get("capabilities") or {}).get("drop") or []):
            chk.error(cwhere, "must drop ALL capabilities")
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(res.get(part) or {}):
                chk.error(cwhere, f"resources.{part} needs cpu and memory")
        if str(annotations.get("prometheus.io/port")) not in {str(p.get("containerPort")) for p in ports}:
            chk.error(cwhere, f"prometheus.io/port {annotations.get('prometheus.io/port')!r} is no container port")
        for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = c.get(probe_name)
            if probe is None:
                if probe_name != "startupProbe":
                    chk.error(cwhere, f"no {probe_name}")
                continue
            for handler in ("httpGet", "tcpSocket", "grpc"):
                if handler in probe and probe[handler].get("port") not in port_ids:
                    chk.error(cwhere, f"{probe_name}.{handler}.port {probe[handler].get('port')!r} is no container port")
        mounts = []
        for m in c.get("volumeMounts") or []:
            vol = volumes.get(m.get("name"))
            if vol is None:
                chk.error(cwhere, f"volumeMount {m.get('name')!r} names no volume")
                continue
            mounts.append((m.get("mountPath", "").rstrip("/"), vol, m))
        env = {e.get("name"): e for e in c.get("env") or []}
        args = [str(a) for a in (c.get("command") or [])[1:] + (c.get("args") or [])]
        for a in args:
            for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a):
                if var not in env:
                    chk.error(cwhere, f"argument {a!r} uses $({var}), which env does not set")
        program = os.path.basename((c.get("command") or [""])[0])
        if program not in PROGRAMS:
            chk.error(cwhere, f"command must run one of {sorted(PROGRAMS)}, not {program!r}")
            continue
        check_container_config(cwhere, PROGRAMS[program], c, args, env, mounts, port_ids, configmaps,
                               services, schemas, chk, grace_s=pod.get("terminationGracePeriodSeconds", 30))


def mounted(path, mounts):
    """The (mount path, volume, mount) holding `path`, deepest first."""
    for mpath, vol, m in sorted(mounts, key=lambda x: -len(x[0])):
        if path == mpath or path.startswith(mpath + "/"):
            return mpath, vol, m
    return None


# What a worker needs past drain_timeout_ms before the kubelet's SIGKILL:
# telling the dispatcher it leaves, and the server's 2 s shutdown.
DRAIN_MARGIN_S = 5


def check_container_config(cwhere, kind, c, args, env, mounts, port_ids, configmaps, services, schemas, chk,
                           grace_s=30):
    schema, _ = schemas[kind]
    flags = {}
    for a in args:
        if not a.startswith("--"):
            continue
        name, _, value = a[2:].partition("=")
        if name not in schema and not any(flag_name(k) == name for k in PENDING_KEYS[kind]):
            chk.error(cwhere, f"{kind}d has no flag --{name}")
        flags[name] = value
    config_path = flags.get("config")
    if not config_path:
        return chk.error(cwhere, "no --config=FILE argument")
    hit = mounted(config_path, mounts)
    if hit is None or "configMap" not in hit[1]:
        return chk.error(cwhere, f"--config {config_path} is not in a mounted ConfigMap")
    text = configmaps.get(hit[1]["configMap"].get("name"), {}).get(os.path.relpath(config_path, hit[0]))
    if text is None:
        return chk.error(cwhere, f"the ConfigMap has no {os.path.relpath(config_path, hit[0])}")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return chk.error(cwhere, f"{config_path}: {e}")
    settings = check_daemon_config(kind, config, f"{cwhere} ({config_path})", schemas, chk)
    chk.settings[kind] = settings

    if settings.get("tls.cert_file"):
        for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
            if "grpc" in (c.get(probe_name) or {}):
                chk.error(cwhere, f"{probe_name} is a gRPC probe on a TLS port: the kubelet's speaks plaintext only")
    if settings.get("port") not in port_ids:
        chk.error(cwhere, f"config port {settings.get('port')} is no container port")
    if settings.get("http_port") is not None and settings["http_port"] not in port_ids:
        chk.error(cwhere, f"config http_port {settings['http_port']} is no container port")
    for key, value in settings.items():
        paths = value if key == "data_roots" else [value]
        if not (key.endswith("_file") or key in ("work_dir", "data_roots")):
            continue
        for path in paths:
            hit = mounted(path, mounts)
            if hit is None:
                chk.error(cwhere, f"{key} {path} is on no volume")
                continue
            mpath, vol, m = hit
            if "secret" in vol:
                items = {i.get("path"): i.get("key") for i in vol["secret"].get("items") or []}
                if os.path.relpath(path, mpath) not in items:
                    chk.error(cwhere, f"{key} {path}: the secret volume has no item {os.path.relpath(path, mpath)}")
            if key == "work_dir" and ("claimTemplate" not in vol and "persistentVolumeClaim" not in vol
                                      or m.get("readOnly")):
                chk.error(cwhere, "work_dir must be on a writable PersistentVolumeClaim: the journal must persist")
    if kind == "worker":
        dispatcher = str(settings.get("dispatcher", "")).removeprefix("grpc://")
        host, _, port = dispatcher.rpartition(":")
        svc = services.get(host.split(".")[0])
        if svc is None or not any(str(p.get("port")) == port for p in svc[1]["spec"].get("ports") or []):
            chk.error(cwhere, f"dispatcher {dispatcher!r} is no Service port in the set")
        advertised = flags.get("advertised-address", settings.get("advertised_address", ""))
        if "$(POD_IP)" not in advertised or (env.get("POD_IP", {}).get("valueFrom", {})
                                             .get("fieldRef", {}).get("fieldPath")) != "status.podIP":
            chk.error(cwhere, "advertised address must be $(POD_IP):PORT with POD_IP from status.podIP")
        elif advertised.rpartition(":")[2] != str(settings.get("port")):
            chk.error(cwhere, f"advertised port {advertised} is not the config's port {settings.get('port')}")
        # SIGTERM drains the worker (docs/operations.md, "Scaling down"): a
        # grace period that ends first kills it with its readers' elements.
        drain_ms = flags.get("drain-timeout-ms") or settings.get("drain_timeout_ms", 25000)
        if not str(drain_ms).isdigit():
            chk.error(cwhere, f"drain_timeout_ms {drain_ms!r} is not a number of milliseconds")
        elif not isinstance(grace_s, int) or grace_s * 1000 < int(drain_ms) + DRAIN_MARGIN_S * 1000:
            chk.error(cwhere, f"terminationGracePeriodSeconds {grace_s} must exceed drain_timeout_ms "
                              f"({drain_ms} ms) by {DRAIN_MARGIN_S} s: the kubelet would kill the worker mid-drain")
        limit = parse_quantity(((c.get("resources") or {}).get("limits") or {}).get("memory"))
        cap = settings.get("max_memory_bytes")
        if not cap or (limit and cap >= limit):
            chk.error(cwhere, "max_memory_bytes must be set below the memory limit: the default is 3/4 of the "
                              "node's memory, and the cgroup would kill the pod first")


def parse_quantity(q):
    m = re.match(r"^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$", str(q or ""))
    if not m:
        return None
    mult = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    return int(m.group(1)) * mult.get(m.group(2), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k8s-dir", default=HERE)
    parser.add_argument("--build", default=os.path.join(REPO, "build"),
                        help="build folder whose dispatcherd/workerd --help give the settings")
    parser.add_argument("--daemon-config", action="append", default=[], metavar="KIND=FILE",
                        help="also check a daemon config file (dispatcher=... or worker=...)")
    opts = parser.parse_args()
    chk = Checker()
    schemas = {kind: daemon_schema(kind, opts.build) for kind in ("dispatcher", "worker")}
    check_set(opts.k8s_dir, schemas, chk)
    for spec in opts.daemon_config:
        kind, _, path = spec.partition("=")
        if kind not in PENDING_KEYS:
            parser.error(f"--daemon-config {spec}: KIND is dispatcher or worker")
        check_daemon_config(kind, load_yaml(path, chk), os.path.relpath(path, REPO), schemas, chk)
    for kind, (_, source) in schemas.items():
        print(f"check_manifests: {kind} settings from {source}")
    for kind, keys in chk.pending.items():
        print(f"check_manifests: note: accepted {kind} settings that neither the build nor the sources "
              f"define yet (pending): {', '.join(sorted(set(keys)))}")
    for e in chk.errors:
        print(f"check_manifests: error: {e}")
    if chk.errors:
        print(f"check_manifests: FAILED, {len(chk.errors)} problem(s)")
        return 1
    print("check_manifests: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
