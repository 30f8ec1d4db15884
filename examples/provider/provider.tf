terraform {
  required_providers {
    trueforge = {
      source = "trueforge/trueforge"
    }
  }
}

# Every setting is optional. Without a provider block the control plane is the SQLite
# database named by TRUEFORGE_DATABASE_URL, else ~/.local/share/trueforge/trueforge.db,
# and the owner is TRUEFORGE_OWNER, else the OS user.
provider "trueforge" {
  database_url = "/var/lib/trueforge/trueforge.db"
  owner        = "alice"
}
