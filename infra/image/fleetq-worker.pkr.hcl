# A worker image per runner, built with Packer's Amazon plugin from the
# install scripts beside this file (docs/deploy.md, "Worker images").
#
#   make build
#   packer init infra/image
#   packer build -var runner=comfyui -var ssm_parameter=/fleetq/prod/comfyui-ami \
#     -var agent_sha256=$(sha256sum bin/agent/amd64/fleetq | cut -d' ' -f1) infra/image
#
# runner=exec bakes the agent alone (your command goes in with a hook);
# runner=comfyui adds ComfyUI at comfyui_ref with its Python environment.
packer {
  required_plugins {
    amazon = { source = "github.com/hashicorp/amazon", version = "~> 1" }
  }
}

variable "runner" {
  type    = string
  default = "comfyui"
  validation {
    condition     = contains(["exec", "comfyui"], var.runner)
    error_message = "The runner must be exec or comfyui."
  }
}
variable "region" {
  type    = string
  default = "us-east-1"
}
variable "base_ami_parameter" {
  type    = string
  default = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
}
variable "instance_type" {
  type    = string
  default = "g5.xlarge"
}
variable "volume_gb" {
  type    = number
  default = 100
}
variable "agent_binary" {
  type    = string
  default = "bin/agent/amd64/fleetq"
}
variable "agent_sha256" {
  type = string
}
variable "comfyui_ref" {
  type    = string
  default = "v0.3.66"
}
variable "hooks_dir" {
  type    = string
  default = "infra/image/hooks"
}
variable "ssm_parameter" {
  type    = string
  default = ""
}

data "amazon-parameterstore" "base" {
  name   = var.base_ami_parameter
  region = var.region
}

source "amazon-ebs" "worker" {
  region        = var.region
  source_ami    = data.amazon-parameterstore.base.value
  instance_type = var.instance_type
  ssh_username  = "ec2-user"
  ami_name      = "fleetq-${var.runner}-{{timestamp}}"
  tags = {
    "fleetq:runner" = var.runner
    "fleetq:base"   = data.amazon-parameterstore.base.value
  }
  launch_block_device_mappings {
    device_name           = "/dev/xvda"
    volume_size           = var.volume_gb
    volume_type           = "gp3"
    encrypted             = true
    delete_on_termination = true
  }
}

build {
  sources = ["source.amazon-ebs.worker"]

  provisioner "shell" {
    inline = ["sudo mkdir -p /opt/fleetq/image.d /tmp/fleetq-image && sudo chown ec2-user /tmp/fleetq-image"]
  }
  provisioner "file" {
    sources     = ["infra/image/install-agent.sh", "infra/image/install-comfyui.sh", "infra/image/run-hooks.sh", var.agent_binary]
    destination = "/tmp/fleetq-image/"
  }
  provisioner "file" {
    source      = "${var.hooks_dir}/"
    destination = "/tmp/fleetq-image/hooks"
  }
  provisioner "shell" {
    inline = [
      "sudo /tmp/fleetq-image/install-agent.sh /tmp/fleetq-image/fleetq ${var.agent_sha256}",
      "if [ ${var.runner} = comfyui ]; then sudo dnf install -y -q git python3.11 && sudo COMFYUI_REF=${var.comfyui_ref} PYTHON=python3.11 /tmp/fleetq-image/install-comfyui.sh; fi",
      "sudo cp -r /tmp/fleetq-image/hooks/. /opt/fleetq/image.d/ && sudo /tmp/fleetq-image/run-hooks.sh /opt/fleetq/image.d",
      # ComfyUI must answer before the image is taken.
      "if [ ${var.runner} = comfyui ]; then sudo systemctl start comfyui && for i in $(seq 60); do curl -fsS http://127.0.0.1:8188/system_stats && exit 0; sleep 5; done; exit 1; fi",
    ]
  }

  post-processor "manifest" {
    output = "infra/image/manifest.json"
  }
  post-processor "shell-local" {
    inline = [
      "if [ -n '${var.ssm_parameter}' ]; then infra/image/publish-ami.sh '${var.ssm_parameter}' \"$(jq -r '.builds[-1].artifact_id' infra/image/manifest.json | cut -d: -f2)\" ${var.region}; fi",
    ]
  }
}
