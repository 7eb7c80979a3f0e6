"""The offline check of the workers' HorizontalPodAutoscaler (issue 37): the
metric it scales on is one the Prometheus adapter serves
(deploy/prometheus/adapter.yaml) from the dispatcher's gauge, over labels the
scrape job gives, for a Deployment that runs workerd. Called by
check_manifests.py, whose YAML loader it is given."""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

ADAPTER_RULES = os.path.join(REPO, "deploy", "prometheus", "adapter.yaml")
SCRAPE_CONFIG = os.path.join(REPO, "deploy", "prometheus", "scrape.yaml")


def adapter_external_metrics(chk, load_yaml):
    """{metric name the adapter serves: the Prometheus series it reads}, from
    deploy/prometheus/adapter.yaml's externalRules."""
    where = os.path.relpath(ADAPTER_RULES, REPO)
    rules = (load_yaml(ADAPTER_RULES, chk) or {}).get("externalRules") or []
    served = {}
    for i, rule in enumerate(rules):
        rwhere = f"{where}: externalRules[{i}]"
        query = str(rule.get("seriesQuery", ""))
        m = re.match(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$", query) or \
            re.search(r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"', query)
        if not m:
            chk.error(rwhere, f"seriesQuery {query!r} names no one metric")
            continue
        series = m.group(1)
        name = rule.get("name") or {}
        matches = name.get("matches", ".*")
        if not re.search(matches, series):
            chk.error(rwhere, f"name.matches {matches!r} does not match the series {series}")
            continue
        # The adapter's `as`: $1-style groups, or the series name unchanged.
        exposed = re.sub(matches, re.sub(r"\$\{?(\d+)\}?", r"\\\1", name["as"]), series) if "as" in name else series
        metrics_query = str(rule.get("metricsQuery", ""))
        for part in ("<<.Series>>", "<<.LabelMatchers>>"):
            if part not in metrics_query:
                chk.error(rwhere, f"metricsQuery lacks {part}: the HPA's namespace would not filter it")
        overrides = (rule.get("resources") or {}).get("overrides") or {}
        if (overrides.get("namespace") or {}).get("resource") not in ("namespace", "namespaces"):
            chk.error(rwhere, "resources.overrides must map the label namespace to resource namespace: "
                              "the adapter looks External metrics up in the HPA's namespace")
        served[exposed] = (series, rwhere, query)
    return served


def dispatcher_gauges():
    """The metric names the dispatcher's sources register."""
    names = set()
    for d in ("dispatcher", "service"):
        for f in os.listdir(os.path.join(REPO, d)):
            if f.endswith(".cc") and not f.endswith("_test.cc"):
                names |= set(re.findall(r'"(sluice_[a-z0-9_]+)"', open(os.path.join(REPO, d, f), encoding="utf-8").read()))
    return names


def default_setting(header, key):
    m = re.search(rf"\b{key}\s*=\s*(\d+)", open(os.path.join(REPO, header), encoding="utf-8").read())
    return int(m.group(1)) if m else None


def check_autoscaler(where, hpa, workloads, chk, load_yaml):
    """The HPA scales the workers' Deployment to sluice_recommended_workers
    as the adapter serves it (README.md, "Autoscaling")."""
    spec = hpa.get("spec") or {}
    ref = spec.get("scaleTargetRef") or {}
    targets = [(w, d, s) for w, d, s in workloads
               if d["kind"] == ref.get("kind") and (d.get("metadata") or {}).get("name") == ref.get("name")]
    if ref.get("apiVersion") != "apps/v1" or not targets:
        chk.error(where, f"scaleTargetRef {ref.get('apiVersion')} {ref.get('kind')} {ref.get('name')!r} "
                         "is no Deployment in the set")
    for twhere, _, tspec in targets:
        commands = [os.path.basename((c.get("command") or [""])[0])
                    for c in ((tspec.get("template") or {}).get("spec") or {}).get("containers") or []]
        if "workerd" not in commands:
            chk.error(where, f"scaleTargetRef {ref.get('name')} does not run workerd: only workers scale")
        if "replicas" in tspec:
            chk.error(twhere, "sets replicas, which every `kubectl apply` would force over the autoscaler's count")
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    most = chk.settings.get("dispatcher", {}).get("autoscale_max_workers") or \
        default_setting("dispatcher/dispatcher_config.h", "autoscale_max_workers")
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        chk.error(where, f"needs 1 <= minReplicas ({low}) <= maxReplicas ({high})")
    elif most is not None and high > most:
        chk.error(where, f"maxReplicas {high} is above the dispatcher's autoscale_max_workers ({most}), "
                         "which the recommendation never passes")
    served = adapter_external_metrics(chk, load_yaml)
    gauges = dispatcher_gauges()
    metrics = spec.get("metrics") or []
    if len(metrics) != 1:
        chk.error(where, "needs exactly one metric, the External sluice_recommended_workers: the HPA takes the "
                         "largest of several, which would override the dispatcher's recommendation")
    for metric in metrics:
        external = metric.get("external") or {}
        name = (external.get("metric") or {}).get("name")
        if metric.get("type") != "External" or name not in served:
            chk.error(where, f"metric {metric.get('type')} {name!r} is not an External metric that "
                             f"{os.path.relpath(ADAPTER_RULES, REPO)} serves ({', '.join(sorted(served)) or 'none'})")
            continue
        series, rwhere, query = served[name]
        if series != "sluice_recommended_workers" or series not in gauges:
            chk.error(rwhere, f"reads {series}, which is not the dispatcher's sluice_recommended_workers")
        target = external.get("target") or {}
        # AverageValue 1: the HPA wants ceil(value / 1) replicas, the
        # recommendation; Value would scale the current count by value / target.
        if target.get("type") != "AverageValue" or str(target.get("averageValue")) != "1":
            chk.error(where, f"target {target} must be type AverageValue with averageValue \"1\", "
                             "so that the replicas wanted are the recommendation itself")
        # The adapter's query matches labels that the scrape job must give.
        given = {r.get("target_label") for job in (load_yaml(SCRAPE_CONFIG, chk) or {}).get("scrape_configs") or []
                 for r in job.get("relabel_configs") or []}
        for label in set(re.findall(r'([a-z_]+)\s*(?:!=|=~|!~|=)', query.split("{", 1)[-1])) | {"namespace"}:
            if label not in given:
                chk.error(rwhere, f"matches label {label!r}, which {os.path.relpath(SCRAPE_CONFIG, REPO)} "
                                  "does not give the series")
        components = {((s.get("template") or {}).get("metadata") or {}).get("labels", {})
                      .get("app.kubernetes.io/component") for _, d, s in workloads if d["kind"] == "StatefulSet"}
        m = re.search(r'component\s*=\s*"([^"]*)"', query)
        if m and m.group(1) not in components:
            chk.error(rwhere, f"component=\"{m.group(1)}\" is not the dispatcher's (its pods are {components})")
