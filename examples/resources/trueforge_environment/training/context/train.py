"""Placeholder training entry point, copied into the snapshot by the Dockerfile."""

if __name__ == "__main__":
    print("training")
