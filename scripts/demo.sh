#!/usr/bin/env bash
# make demo, after the engine, images and node containers are up: the real meshctl path.
# meshctl init with the head container as head, add-node for gpu1 and cpu1 over SSH, status,
# and Slurm jobs across all nodes. Safe to run again: an existing demo mesh is converged.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=.demo
MESH=$DEMO/mesh
KEY=$DEMO/id_ed25519
HEAD=100.100.20.10 GPU1=100.100.20.11 CPU1=100.100.20.12
SSH=(ssh -i "$KEY" -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o "UserKnownHostsFile=$MESH/known_hosts" -o LogLevel=ERROR)

# Each step says the seconds since the demo's cluster phase began: where its minutes go.
say() { echo "==> [${SECONDS}s] $*"; }
SECONDS=0

mkdir -p "$DEMO"; chmod 700 "$DEMO"
[ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C meshctl-demo -f "$KEY"
say "Giving the demo nodes the demo SSH key (what a cloud provider does at boot)"
python -m meshctl.localmesh authorize --key "$KEY.pub" head gpu1 cpu1

# gpu1 gets two simulated GPUs: the stand-in nvidia-smi (a test double printing real 2-GPU
# outputs kept in molecule/resources/simulated-gpu) and /dev/nvidia0, /dev/nvidia1, /dev/nvidiactl.
say "Simulating two GPUs on gpu1"
molecule/resources/simulate-gpus gpu1

again=0
[ -f "$MESH/mesh.yml" ] && again=1  # a second `make demo`: the mesh is converged again below
if [ "$again" = 0 ]; then
  say "meshctl init $MESH --head root@$HEAD"
  meshctl init "$MESH" --head "root@$HEAD" --name head --ssh-key "$KEY" --provider local
  # The demo nodes are containers behind this machine's TLS-intercepting proxy (if any): pip
  # inside them (MLflow, the job environment) needs this machine's CA bundle, which the node image
  # trusts. MLflow comes from the test bed's wheel cache when `make test` has filled it
  # (meshctl/localmesh/wheels.py), else from PyPI.
  printf 'mlflow_pip_environment: %s\nmlflow_workers: 1\n' "$(python -m meshctl.localmesh wheels --env)" \
    >> "$MESH/group_vars/all.yml"
fi
# The job environment gets a CPU build of PyTorch: a wheel kept on this machine when there is one
# (MESHCTL_WHEELS, default /opt/wheels), else PyTorch's CPU index (not gigabytes of CUDA).
if ! grep -q '^job_env_' "$MESH/group_vars/all.yml"; then
  wheels=${MESHCTL_WHEELS:-/opt/wheels}
  wheel=$(ls "$wheels"/torch-*+cpu-cp311-*.whl 2>/dev/null | head -n 1 || true)
  {
    printf 'job_env_pip_environment:\n  PIP_CERT: /etc/ssl/certs/ca-certificates.crt\n'
    # Bytecode for what a job loads at its start only (roles/job_env/README.md): three nodes
    # share this machine's cores here.
    printf 'job_env_bytecode: imports\n'
    if [ -n "$wheel" ]; then
      version=$(basename "$wheel" | cut -d- -f2 | cut -d+ -f1)
      printf 'job_env_torch: torch==%s\njob_env_find_links_dir: %s\n' "$version" "$wheels"
    else
      printf 'job_env_pip_index_url: https://download.pytorch.org/whl/cpu\n'
      printf 'job_env_pip_extra_index_urls: [https://pypi.org/simple]\n'
    fi
  } >> "$MESH/group_vars/all.yml"
fi
# The people who run jobs: one job user, alice (root runs no job: DisableRootJobs).
if ! grep -q '^job_users_list' "$MESH/group_vars/all.yml"; then
  printf 'job_users_list:\n  - {name: alice, uid: 2001}\n' >> "$MESH/group_vars/all.yml"
fi
AS_ALICE="cd /tmp && runuser -u alice --"
export MESHCTL_MESH=$MESH
# Both machines in one add-node: each is checked over SSH first, then both are set up with the
# head in one run, side by side; each is named by its hostname (the containers' are gpu1, cpu1).
new=()
for node in gpu1:$GPU1 cpu1:$CPU1; do
  name=${node%%:*} addr=${node#*:}
  if grep -q "^    $name:" "$MESH/mesh.yml"; then
    say "$name is already in the mesh"
  else
    new+=("root@$addr")
  fi
done
if [ ${#new[@]} -gt 0 ]; then
  say "meshctl add-node ${new[*]}"
  meshctl add-node "${new[@]}" --ssh-key "$KEY" --provider local
fi
if [ "$again" = 1 ]; then
  # On a first run the add-node above converged its nodes and the head: nothing is left pending.
  say "meshctl apply (converges anything left pending; changes nothing otherwise)"
  meshctl apply
fi
say "meshctl status"
meshctl status
say "A Slurm job across all nodes, as the job user alice: srun -N3 hostname"
"${SSH[@]}" "root@$HEAD" "$AS_ALICE srun -N3 --label hostname" | sort
say "Both GPUs of gpu1: srun -w gpu1 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES"
visible=$("${SSH[@]}" "root@$HEAD" "$AS_ALICE srun -w gpu1 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES")
echo "CUDA_VISIBLE_DEVICES=$visible"
if [ "$visible" != "0,1" ]; then
  echo "demo: FAILED: a job asking for both GPUs of gpu1 saw CUDA_VISIBLE_DEVICES='$visible', not 0,1" >&2
  exit 1
fi
say "sinfo"
"${SSH[@]}" "root@$HEAD" sinfo -N -o "'%N %T %c %m %G'" | tee "$DEMO/sinfo.txt"
# gpu1's GRES column, e.g. gpu:rtx_4500_ada_generation:1,gpu:rtx_a5000:1: its counts add up to 2.
gpus=$(awk '$1 == "gpu1" {print $5; exit}' "$DEMO/sinfo.txt" | tr ',' '\n' | awk -F: '$1 == "gpu" {n += $NF} END {print n + 0}')
if [ "$gpus" != 2 ]; then
  echo "demo: FAILED: sinfo shows $gpus GPUs on gpu1, not its two simulated ones" >&2
  exit 1
fi
say "MLflow on the head, asked from cpu1 through the tracking URI every node has (no account: 401)"
"${SSH[@]}" "root@$CPU1" ". /etc/profile.d/meshctl-mlflow.sh; python3 -" <<'PY'
import os, urllib.error, urllib.request
uri = os.environ["MLFLOW_TRACKING_URI"]
print("MLFLOW_TRACKING_URI=" + uri)
print("health:", urllib.request.urlopen(uri + "/health").read().decode())
try:
    urllib.request.urlopen(uri + "/api/2.0/mlflow/experiments/search?max_results=1")
    raise SystemExit("demo: FAILED: MLflow answered without credentials")
except urllib.error.HTTPError as error:
    print("API without an account:", error.code)
PY
say "The NFS export on the head"
"${SSH[@]}" "root@$HEAD" "grep -E 'Clients|Path' /etc/ganesha/ganesha.conf /etc/exports.d/meshctl.exports 2>/dev/null || true"

# Training across the mesh from the share, as a user runs it: examples/ddp in alice's folder on
# the share (the head's export; every demo node sees it: docs/testing.md, "A bed like real VMs"),
# submitted from there with --nodes=3, its output written there by its batch host.
SHARED=/mnt/shared-slurm/users/alice/ddp
say "examples/ddp into alice's folder on the share ($SHARED); every node reads what the head wrote"
tar -C examples -c ddp | "${SSH[@]}" "root@$HEAD" "rm -rf $SHARED && mkdir -p $SHARED && tar -C $SHARED --strip-components=1 -x && chown -R alice $SHARED"
wanted=$("${SSH[@]}" "root@$HEAD" "sha256sum $SHARED/train.py" | cut -d' ' -f1)
for node in head:$HEAD gpu1:$GPU1 cpu1:$CPU1; do
  seen=$("${SSH[@]}" "root@${node#*:}" "sha256sum $SHARED/train.py 2>/dev/null" | cut -d' ' -f1)
  echo "${node%%:*}: $SHARED/train.py ${seen:-MISSING}"
  [ "$seen" = "$wanted" ] || { echo "demo: FAILED: ${node%%:*} does not see the head's share" >&2; exit 1; }
done
say "A 3-node PyTorch DDP job (examples/ddp) submitted by alice from the share, tracked in MLflow"
job=$("${SSH[@]}" "root@$HEAD" "cd $SHARED && runuser -u alice -- sbatch --parsable --nodes=3 ddp.sbatch --steps 60")
# Asked every second until Slurm no longer queues it: sbatch --wait asks 2 s, 10 s, then every
# 32 s after the submit (Slurm's sbatch.c), and most of the demo's wait was that, the job done.
"${SSH[@]}" "root@$HEAD" "while squeue --noheader --jobs=$job 2>/dev/null | grep -q .; do sleep 1; done"
"${SSH[@]}" "root@$HEAD" "cat $SHARED/ddp-$job.out" | tee "$DEMO/ddp.out"
"${SSH[@]}" "root@$HEAD" "scontrol show job $job" | grep -q 'JobState=COMPLETED' \
  || { echo "demo: FAILED: the DDP job $job did not complete" >&2; exit 1; }
run_id=$(python3 -c 'import json,sys; print(next(json.loads(l)["run_id"] for l in open(sys.argv[1]) if l.startswith("{") and json.loads(l)["rank"] == 0))' "$DEMO/ddp.out")
say "The run in MLflow (asked on the head)"
"${SSH[@]}" "root@$HEAD" ". /etc/profile.d/meshctl-mlflow.sh; python3 -" <<PY
import base64, json, os, urllib.request
api = os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow"
# The tracking server asks for an account: the run is alice's, read with hers (her jobs get it from
# the profile snippet; root reads her account file here).
mine = dict(line.split("=", 1) for line in open("/etc/meshctl/task-env.d/users/alice/mlflow.env").read().split())
account = "%s:%s" % (mine["MLFLOW_TRACKING_USERNAME"], mine["MLFLOW_TRACKING_PASSWORD"])
auth = {"Authorization": "Basic " + base64.b64encode(account.encode()).decode()}
get = lambda path: json.load(urllib.request.urlopen(urllib.request.Request(api + path, headers=auth)))
run = get("/runs/get?run_id=$run_id")["run"]
losses = get("/metrics/get-history?run_id=$run_id&metric_key=loss&max_results=10000")["metrics"]
params = {p["key"]: p["value"] for p in run["data"]["params"]}
# Artifacts live in the head's store, reached only through the server with an account that may
# read the run (never on the share): the checkpoint as alice's account lists it.
folder = "%s/%s/artifacts/checkpoint" % (run["info"]["experiment_id"], "$run_id")
listed = json.load(urllib.request.urlopen(urllib.request.Request(
    os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow-artifacts/artifacts?path=" + folder, headers=auth)))
checkpoint = [f for f in listed.get("files", []) if f["path"] == "model.pt" and int(f.get("file_size", 0)) > 0]
print("run", "$run_id", run["info"]["status"])
print("world size", params["world_size"], "backend", params["backend"])
print("steps logged", len(losses), "final loss", sorted(losses, key=lambda m: m["step"])[-1]["value"])
print("checkpoint", folder + "/model.pt", "%s bytes" % checkpoint[0]["file_size"] if checkpoint else "MISSING")
complete = run["info"]["status"] == "FINISHED" and len(losses) == 60 and bool(checkpoint)
raise SystemExit(0 if complete else "demo: FAILED: the MLflow run is incomplete")
PY
say "meshctl doctor: every link between two nodes (iperf3), and an all-reduce across them"
meshctl doctor
echo
echo "The demo mesh is in $MESH. Try: MESHCTL_MESH=$MESH .venv/bin/meshctl status"
echo "SSH to the head: ssh -i $KEY root@$HEAD   (make demo-down removes the containers)"
