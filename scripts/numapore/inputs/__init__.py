"""What the user gives, checked before any job starts: the sample sheet, reads and reference."""
