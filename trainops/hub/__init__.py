"""Hugging Face Hub import/export and safetensors header reading."""
