"""adaptlab.study"""
