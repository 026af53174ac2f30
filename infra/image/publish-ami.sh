#!/bin/bash
# Publishes a built image's id to the SSM parameter a fleet's
# ami_ssm_parameter names, so the fleet's next launches boot it (EC2
# resolves the parameter at each launch; no deploy needed).
#
# usage: publish-ami.sh PARAMETER AMI_ID [REGION]
set -euo pipefail
param=${1:?usage: publish-ami.sh PARAMETER AMI_ID [REGION]}
ami=${2:?usage: publish-ami.sh PARAMETER AMI_ID [REGION]}
region=${3:-${AWS_REGION:-}}
case $ami in
  ami-*) ;;
  *) echo "publish-ami: $ami is not an image id" >&2; exit 1 ;;
esac
args=(--name "$param" --type String --data-type aws:ec2:image --overwrite --value "$ami")
if [ -n "$region" ]; then args+=(--region "$region"); fi
aws ssm put-parameter "${args[@]}" >/dev/null
echo "publish-ami: $param = $ami"
