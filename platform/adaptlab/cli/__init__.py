"""adaptlab.cli"""
