#!/usr/bin/env bash
# Applies examples/usage-composition.yaml with real ownerReferences: the CRD and the parent
# first, then the children with the parent's UID substituted for PARENT_UID.
# Uses the current KUBECONFIG (e.g. the one `lien sandbox` writes).
set -euo pipefail
file=$(dirname "$0")/usage-composition.yaml
for _ in 1 2 3 4 5; do
  # The first try may fail client-side while the new CRD is not yet in the OpenAPI.
  kubectl apply -f "$file" --selector role=parent && break
  sleep 1
done
uid=$(kubectl get xwebapp shop -n default -o jsonpath='{.metadata.uid}')
echo "parent XWebApp default/shop has uid $uid"
sed "s/PARENT_UID/$uid/" "$file" | kubectl apply -f - --selector role=child
