# A Dockerfile instead of image + build_script. On the local backend it must start
# FROM platform and may only RUN commands: each RUN becomes a step of the build script.
resource "trueforge_environment" "node" {
  name             = "node"
  sandbox_provider = trueforge_sandbox_provider.local.name

  dockerfile = <<-EOT
    FROM platform
    RUN mkdir -p /opt/node && echo "node tools" > /opt/node/README
    RUN printf '#!/bin/sh\necho hello\n' > /usr/local/bin/hello && chmod +x /usr/local/bin/hello
  EOT
}

# On Daytona: any tagged image, a build context, and an entrypoint (the sandbox's main
# process, written into the Dockerfile as its last ENTRYPOINT).
resource "trueforge_environment" "web" {
  name             = "web"
  sandbox_provider = trueforge_sandbox_provider.daytona.name

  dockerfile    = <<-EOT
    FROM python:3.12-slim
    COPY . /opt/web
    RUN pip install --no-cache-dir -r /opt/web/requirements.txt
  EOT
  build_context = "${path.module}/web"
  entrypoint    = ["/usr/local/bin/python", "-m", "http.server", "8080"]
}
