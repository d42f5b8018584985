"""The official Kubernetes Python client against a sandbox: typed CRUD, patch, watch, delete and a
custom resource through the dynamic client.

Usage: python3 client_crud.py KUBECONFIG NAMESPACE

Prints one line per step, `ok <step>` or `FAIL <step>: <error>`, and exits 1 if any step failed.
Typed clients deserialize every answer into their models, so a response of the wrong shape (a
Status where the object is expected, a missing required field) fails here even when kubectl and
kube-rs tolerate it.
"""

import sys
import time
import traceback

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

failures = []


def step(name, fn):
    try:
        fn()
        print(f"ok {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
        detail = e.body if isinstance(e, ApiException) else repr(e)
        print(f"FAIL {name}: {detail}", flush=True)
        traceback.print_exc(file=sys.stderr)
        failures.append(name)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_gone(read):
    try:
        read()
    except ApiException as e:
        expect(e.status == 404, f"expected 404, got {e.status}")
        return
    raise AssertionError("the object still exists")


def expect_returned(deleted, kind, name):
    """kube-apiserver answers the DELETE of some kinds (Service, ServiceAccount, Pod) with the
    deleted object; the typed client reads whatever comes into its model, so check what it holds."""
    expect(deleted.kind == kind and deleted.metadata.name == name,
           f"DELETE answered kind {deleted.kind!r}, not the {kind}")


def main():
    kubeconfig, ns = sys.argv[1], sys.argv[2]
    api_client = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)

    step("namespace create", lambda: core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))))

    # ConfigMap: create, read, list, replace, three patch kinds, delete.
    def configmap_crud():
        cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py", labels={"app": "py"}),
                                data={"a": "1"})
        created = core.create_namespaced_config_map(ns, cm)
        expect(created.metadata.uid, "no uid")
        read = core.read_namespaced_config_map("py", ns)
        expect(read.data == {"a": "1"}, f"data {read.data}")
        listed = core.list_namespaced_config_map(ns, label_selector="app=py")
        expect([c.metadata.name for c in listed.items] == ["py"], "list by label")
        read.data["b"] = "2"
        replaced = core.replace_namespaced_config_map("py", ns, read)
        expect(replaced.data == {"a": "1", "b": "2"}, f"replaced {replaced.data}")
        # The typed client sends a dict body as a strategic merge patch, a list as a JSON patch.
        patched = core.patch_namespaced_config_map("py", ns, {"data": {"c": "3"}})
        expect(patched.data.get("c") == "3", f"strategic patch {patched.data}")
        patched = core.patch_namespaced_config_map(
            "py", ns, [{"op": "replace", "path": "/data/a", "value": "10"}])
        expect(patched.data["a"] == "10", f"json patch {patched.data}")
        status = core.delete_namespaced_config_map("py", ns)
        expect(status.kind == "Status" and status.status == "Success", f"delete {status}")
        expect_gone(lambda: core.read_namespaced_config_map("py", ns))

    step("configmap crud", configmap_crud)

    def service_crud():
        svc = client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(selector={"app": "web"},
                                      ports=[client.V1ServicePort(port=80, target_port=8080)]))
        created = core.create_namespaced_service(ns, svc)
        expect(created.spec.ports[0].port == 80, "port")
        read = core.read_namespaced_service("web", ns)
        read.metadata.labels = {"tier": "front"}
        replaced = core.replace_namespaced_service("web", ns, read)
        expect(replaced.metadata.labels == {"tier": "front"}, "labels")
        patched = core.patch_namespaced_service("web", ns,
                                                {"metadata": {"annotations": {"a": "b"}}})
        expect(patched.metadata.annotations == {"a": "b"}, "annotations")
        expect(len(core.list_namespaced_service(ns).items) == 1, "list")
        expect_returned(core.delete_namespaced_service("web", ns), "Service", "web")
        expect_gone(lambda: core.read_namespaced_service("web", ns))

    step("service crud", service_crud)

    def serviceaccount_crud():
        sa = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="robot"))
        core.create_namespaced_service_account(ns, sa)
        read = core.read_namespaced_service_account("robot", ns)
        read.metadata.labels = {"x": "y"}
        core.replace_namespaced_service_account("robot", ns, read)
        patched = core.patch_namespaced_service_account(
            "robot", ns, {"automountServiceAccountToken": False})
        expect(patched.automount_service_account_token is False, "patch")
        names = [s.metadata.name for s in core.list_namespaced_service_account(ns).items]
        expect("robot" in names, f"list {names}")
        expect_returned(core.delete_namespaced_service_account("robot", ns), "ServiceAccount",
                        "robot")
        expect_gone(lambda: core.read_namespaced_service_account("robot", ns))

    step("serviceaccount crud", serviceaccount_crud)

    def deployment_crud():
        labels = {"app": "web"}
        dep = client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(containers=[
                        client.V1Container(name="web", image="nginx")]))))
        apps.create_namespaced_deployment(ns, dep)
        read = apps.read_namespaced_deployment("web", ns)
        read.spec.replicas = 2
        replaced = apps.replace_namespaced_deployment("web", ns, read)
        expect(replaced.spec.replicas == 2, "replicas")
        patched = apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 3}})
        expect(patched.spec.replicas == 3, "patched replicas")
        expect(len(apps.list_namespaced_deployment(ns).items) == 1, "list")
        status = apps.delete_namespaced_deployment("web", ns)
        expect(status.kind == "Status", f"delete {status}")
        expect_gone(lambda: apps.read_namespaced_deployment("web", ns))

    step("deployment crud", deployment_crud)

    def watch_configmaps():
        listed = core.list_namespaced_config_map(ns)
        rv = listed.metadata.resource_version
        core.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="w"), data={"k": "v"}))
        core.patch_namespaced_config_map("w", ns, {"data": {"k": "v2"}})
        core.delete_namespaced_config_map("w", ns)
        seen = []
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv,
                              timeout_seconds=10):
            if event["object"].metadata.name == "w":
                seen.append((event["type"], event["object"].data.get("k")))
            if len(seen) == 3:
                w.stop()
        expect(seen == [("ADDED", "v"), ("MODIFIED", "v2"), ("DELETED", "v2")], f"saw {seen}")

    step("watch", watch_configmaps)

    def custom_resource():
        crd = client.V1CustomResourceDefinition(
            metadata=client.V1ObjectMeta(name="gadgets.py.lien.dev"),
            spec=client.V1CustomResourceDefinitionSpec(
                group="py.lien.dev", scope="Namespaced",
                names=client.V1CustomResourceDefinitionNames(
                    plural="gadgets", singular="gadget", kind="Gadget"),
                versions=[client.V1CustomResourceDefinitionVersion(
                    name="v1", served=True, storage=True,
                    schema=client.V1CustomResourceValidation(
                        open_apiv3_schema=client.V1JSONSchemaProps(
                            type="object",
                            properties={"spec": client.V1JSONSchemaProps(
                                type="object",
                                properties={"size": client.V1JSONSchemaProps(
                                    type="integer")})})))]))
        ext.create_custom_resource_definition(crd)
        deadline = time.monotonic() + 20
        while True:
            got = ext.read_custom_resource_definition("gadgets.py.lien.dev")
            conds = {c.type: c.status for c in (got.status.conditions or [])}
            if conds.get("Established") == "True":
                break
            expect(time.monotonic() < deadline, "the CRD was not established in 20 s")
            time.sleep(0.1)
        dyn = dynamic.DynamicClient(api_client)
        gadgets = dyn.resources.get(api_version="py.lien.dev/v1", kind="Gadget")
        gadgets.create(body={"apiVersion": "py.lien.dev/v1", "kind": "Gadget",
                             "metadata": {"name": "g"}, "spec": {"size": 1}}, namespace=ns)
        got = gadgets.get(name="g", namespace=ns)
        expect(got.spec.size == 1, "size")
        patched = gadgets.patch(name="g", namespace=ns, body={"spec": {"size": 2}},
                                content_type="application/merge-patch+json")
        expect(patched.spec.size == 2, "patched size")
        expect([i.metadata.name for i in gadgets.get(namespace=ns).items] == ["g"], "list")
        gadgets.delete(name="g", namespace=ns)
        expect_gone(lambda: gadgets.get(name="g", namespace=ns))
        ext.delete_custom_resource_definition("gadgets.py.lien.dev")

    step("custom resource (dynamic client)", custom_resource)

    def status_errors():
        """ApiException carries kube-apiserver's Status: status code, reason, and a JSON body the
        client's deserializer reads as a V1Status (details, causes)."""
        def refused(call):
            try:
                call()
            except ApiException as e:
                return e, api_client.deserialize(
                    type("R", (), {"data": e.body})(), "V1Status")
            raise AssertionError("the request was not refused")

        e, st = refused(lambda: core.read_namespaced_config_map("missing", ns))
        expect((e.status, e.reason) == (404, "Not Found"), f"{e.status} {e.reason}")
        expect((st.reason, st.details.name, st.details.kind) == ("NotFound", "missing", "configmaps"),
               f"404 {st}")
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dup"))
        core.create_namespaced_config_map(ns, body)
        e, st = refused(lambda: core.create_namespaced_config_map(ns, body))
        expect((e.status, st.reason, st.message) == (409, "AlreadyExists", 'configmaps "dup" already exists'),
               f"409 {st}")
        e, st = refused(lambda: core.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))))
        expect((e.status, st.reason, st.details.kind) == (422, "Invalid", "ConfigMap"), f"422 {st}")
        expect([c.field for c in st.details.causes] == ["metadata.name"], f"causes {st.details.causes}")

    step("status errors", status_errors)

    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
