"""What the protocol emulators share."""
